// Offload folders: Accelerate's format both ways, bit-exact round trips, merging, safetensors entries, the weight
// maps, and crash safety (a writer killed with SIGKILL never leaves a torn index).
#include "ferry/io/offload.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "ferry/io/safetensors.h"
#include "io/io_test_util.h"
#include "support/error_of.h"

namespace fs = std::filesystem;

namespace ferry::io {
namespace {

using iotest::same_bits;
using iotest::TempDir;

Tensor bit_pattern(Shape shape, DType dtype, uint8_t seed) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  auto* p = static_cast<uint8_t*>(t.nbytes() ? t.raw_data() : nullptr);
  for (std::size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(seed * 31 + i * 13);
  if (dtype == DType::Bool)
    for (std::size_t i = 0; i < t.nbytes(); ++i) p[i] &= 1;
  return t;
}

TEST(Offload, RoundTripsAreBitExactForEveryDType) {
  // Every bit pattern, NaN payloads and fp8 included: f32, f16, bf16, fp8 (both), int64 and the rest.
  TempDir dir;
  OffloadIndex index;
  StateDict originals;
  uint8_t seed = 0;
  for (DType t : kAllDTypes) {
    const std::string name = "layer.w_" + std::string(dtype_name(t));
    originals.insert(name, bit_pattern({7, 3}, t, ++seed));
    offload_weight(originals.at(name), name, dir.path(), index);
  }
  save_offload_index(index, dir.path());
  const OffloadIndex loaded = load_offload_index(dir.path());
  EXPECT_EQ(loaded, index);
  for (const auto& [name, t] : originals) {
    const Tensor back = load_offloaded_weight(dir / (name + ".dat"), loaded.at(name));
    EXPECT_TRUE(same_bits(back, t)) << name;
    EXPECT_EQ(back.storage()->kind(), Storage::Kind::MappedView) << "reads are zero-copy views";
  }
}

TEST(Offload, IndexAndDatFilesUseAcceleratesFormat) {
  TempDir dir;
  OffloadIndex index;
  offload_weight(bit_pattern({2, 3}, DType::BF16, 1), "w", dir.path(), index);
  offload_weight(Tensor::from_vector(std::vector<float>{2.5f}, {}), "scalar", dir.path(), index);
  offload_weight(bit_pattern({4}, DType::F8_E4M3FN, 2), "q", dir.path(), index);
  save_offload_index(index, dir.path());
  const auto j = nlohmann::json::parse(iotest::read_bytes(dir / "index.json"));
  EXPECT_EQ(j, nlohmann::json::parse(R"({"w": {"dtype": "bfloat16", "shape": [2, 3]},
                                         "scalar": {"dtype": "float32", "shape": []},
                                         "q": {"dtype": "float8_e4m3fn", "shape": [4]}})"));
  EXPECT_EQ(fs::file_size(dir / "w.dat"), 12u) << "raw 16-bit patterns, no header";
  EXPECT_EQ(fs::file_size(dir / "scalar.dat"), 4u) << "0-d stored as one element";
  const Tensor s = load_offloaded_weight(dir / "scalar.dat", index.at("scalar"));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<float>(), 2.5f);
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "no temporary file left";
}

TEST(Offload, ReadsAFolderWrittenByAccelerate) {
  // What accelerate.utils.offload_weight writes: json.dump(index, indent=2) and np.memmap bytes.
  TempDir dir;
  iotest::write_bytes(dir / "index.json", R"({
  "linear.weight": {
    "dtype": "float16",
    "shape": [
      2
    ]
  },
  "linear.bias": {
    "dtype": "bfloat16",
    "shape": [
      1
    ]
  },
  "step": {
    "dtype": "int64",
    "shape": []
  }
})");
  const uint16_t f16[2] = {0x3c00, 0xbc00};  // 1, -1
  const uint16_t bf16[1] = {0x4040};          // 3
  const int64_t step[1] = {42};
  iotest::write_bytes(dir / "linear.weight.dat", std::string(reinterpret_cast<const char*>(f16), 4));
  iotest::write_bytes(dir / "linear.bias.dat", std::string(reinterpret_cast<const char*>(bf16), 2));
  iotest::write_bytes(dir / "step.dat", std::string(reinterpret_cast<const char*>(step), 8));
  const OffloadedWeightsLoader w({}, dir.path());
  EXPECT_EQ(w.get("linear.weight").to_vector<float>(), (std::vector<float>{1, -1}));
  EXPECT_EQ(w.get("linear.bias").dtype(), DType::BF16);
  EXPECT_EQ(w.get("linear.bias").item<float>(), 3.0f);
  EXPECT_EQ(w.get("step").dim(), 0);
  EXPECT_EQ(w.get("step").item<int64_t>(), 42);
}

TEST(Offload, SavingMergesIntoTheExistingIndex) {
  TempDir dir;
  OffloadIndex first, second;
  offload_weight(bit_pattern({2}, DType::F32, 1), "a", dir.path(), first);
  offload_weight(bit_pattern({3}, DType::F32, 2), "b", dir.path(), first);
  save_offload_index(first, dir.path());
  // A field ferry does not model survives the merge untouched.
  auto j = nlohmann::json::parse(iotest::read_bytes(dir / "index.json"));
  j["b"]["note"] = "kept";
  iotest::write_bytes(dir / "index.json", j.dump());
  offload_weight(bit_pattern({5}, DType::F16, 3), "a", dir.path(), second);  // replaces a
  offload_weight(bit_pattern({1}, DType::I64, 4), "c", dir.path(), second);
  save_offload_index(second, dir.path());
  const auto merged = nlohmann::json::parse(iotest::read_bytes(dir / "index.json"));
  EXPECT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged["a"]["dtype"], "float16");
  EXPECT_EQ(merged["a"]["shape"], nlohmann::json::array({5}));
  EXPECT_EQ(merged["b"]["note"], "kept");
  save_offload_index({}, dir.path());  // an empty index writes nothing
  EXPECT_EQ(nlohmann::json::parse(iotest::read_bytes(dir / "index.json")), merged);
}

TEST(Offload, CorruptExistingIndexIsReportedNotOverwritten) {
  TempDir dir;
  iotest::write_bytes(dir / "index.json", "{\"a\": {\"dtype\": ");
  OffloadIndex idx;
  offload_weight(bit_pattern({2}, DType::F32, 1), "x", dir.path(), idx);
  EXPECT_FERRY_ERROR(save_offload_index(idx, dir.path()), "offload index is not valid JSON");
  EXPECT_EQ(iotest::read_bytes(dir / "index.json"), "{\"a\": {\"dtype\": ");
}

TEST(Offload, EntriesPointingIntoSafetensorsAreReadFromThere) {
  TempDir dir;
  StateDict sd;
  sd.insert("model.w", Tensor::from_vector(std::vector<float>{1.5f, -2.0f, 4.0f}, {3}, DType::BF16));
  save_safetensors(sd, dir / "model.safetensors");
  fs::create_directory(dir / "offload");
  OffloadIndex index;
  index["w_same"] = OffloadEntry{.safetensors_file = (dir / "model.safetensors").string(), .weight_name = "model.w"};
  index["w_cast"] = OffloadEntry{.dtype = DType::F32, .safetensors_file = "../model.safetensors",
                                 .weight_name = "model.w"};
  index["model.w"] = OffloadEntry{.safetensors_file = "../model.safetensors"};  // weight_name defaults to the key
  save_offload_index(index, dir / "offload");
  const OffloadedWeightsLoader w({}, dir / "offload");
  EXPECT_EQ(w.get("w_same").storage()->kind(), Storage::Kind::MappedView) << "nothing copied";
  EXPECT_EQ(w.get("w_cast").dtype(), DType::F32);
  EXPECT_EQ(w.get("w_cast").to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 4.0f}));
  EXPECT_TRUE(same_bits(w.get("model.w"), sd.at("model.w")));
  int dat_files = 0;
  for (const auto& e : fs::directory_iterator(dir / "offload")) dat_files += e.path().extension() == ".dat";
  EXPECT_EQ(dat_files, 0);
  const auto j = nlohmann::json::parse(iotest::read_bytes(dir / "offload" / "index.json"));
  EXPECT_EQ(j["w_cast"], nlohmann::json::parse(
                             R"({"safetensors_file": "../model.safetensors", "weight_name": "model.w", "dtype": "float32"})"));
}

// ferry's data_file entries (a GGUF file's tensors, read in place): a byte window of any file, mapped or staged.
TEST(Offload, DataFileEntriesAreByteWindowsOfTheFile) {
  TempDir dir;
  std::vector<uint8_t> bytes(100, 0xEE);
  const std::vector<float> values{1.25f, -3.0f, 0.5f, 8.0f};
  std::memcpy(bytes.data() + 36, values.data(), 16);
  {
    std::ofstream out(dir / "blob.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  fs::create_directory(dir / "offload");
  OffloadIndex index;
  index["w"] = OffloadEntry{.dtype = DType::F32, .shape = Shape{2, 2}, .data_file = (dir / "blob.bin").string(),
                            .data_offset = 36};
  index["past_end"] = OffloadEntry{.dtype = DType::F32, .shape = Shape{20}, .data_file = (dir / "blob.bin").string(),
                                   .data_offset = 36};
  save_offload_index(index, dir / "offload");
  EXPECT_EQ(load_offload_index(dir / "offload"), index);  // round trip through index.json
  const OffloadedWeightsLoader w({}, dir / "offload");
  const Tensor t = w.get("w");
  EXPECT_EQ(t.storage()->kind(), Storage::Kind::MappedView) << "nothing copied";
  EXPECT_EQ(t.to_vector<float>(), values);
  EXPECT_NE(test::error_of([&] { w.get("past_end"); }).find("past the end"), std::string::npos);
  w.prefetch("w");  // advice: false when the pages are already cached, as here
  EXPECT_FALSE(w.prefetch("missing"));
  // Malformed data_file entries.
  for (const char* bad : {R"({"w": {"data_file": "", "data_offset": 0, "dtype": "float32", "shape": [1]}})",
                          R"({"w": {"data_file": "x", "dtype": "float32", "shape": [1]}})",
                          R"({"w": {"data_file": "x", "data_offset": -4, "dtype": "float32", "shape": [1]}})",
                          R"({"w": {"data_file": "x", "data_offset": 0, "shape": [1]}})",
                          R"({"w": {"data_file": "x", "data_offset": 0, "dtype": "float32"}})"}) {
    EXPECT_THROW(parse_offload_index(bad, "index.json"), Error) << bad;
  }
}

// Fraction of `path`'s pages in the page cache (mincore on a fresh mapping, which itself reads nothing).
double resident_fraction(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  const auto size = static_cast<std::size_t>(fs::file_size(path));
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)), pages = (size + page - 1) / page;
  std::vector<unsigned char> in(pages);
  ::mincore(p, size, in.data());
  ::munmap(p, size);
  std::size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return static_cast<double>(n) / static_cast<double>(pages);
}

// Writes the file's pages back and drops them from the page cache. False where the filesystem keeps them (tmpfs).
// Retries until no page is left: under load a few pages (still under writeback) can survive one DONTNEED, and a
// prefetch that samples only resident pages would rightly read nothing.
bool evict(const fs::path& path) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    ::fsync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    if (resident_fraction(path) == 0.0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return resident_fraction(path) < 0.1;
}

bool becomes_resident(const fs::path& path) {
  for (int i = 0; i < 500; ++i) {  // readahead is asynchronous: up to 5 s
    if (resident_fraction(path) > 0.9) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(Offload, PrefetchReadsDiskWeightsIntoThePageCacheAheadOfGet) {
  TempDir dir;
  const Tensor big = Tensor::zeros({1024, 1024}, DType::F32);  // 4 MiB
  StateDict sd;
  sd.insert("model.w", big);
  save_safetensors(sd, dir / "model.safetensors");
  fs::create_directory(dir / "offload");
  OffloadIndex index;
  offload_weight(big, "dat.w", dir / "offload", index);
  index["st.w"] = OffloadEntry{.safetensors_file = "../model.safetensors", .weight_name = "model.w"};
  save_offload_index(index, dir / "offload");
  StateDict ram;
  ram.insert("ram.w", Tensor::zeros({2}, DType::F32));
  const OffloadedWeightsLoader w(ram, dir / "offload");
  // Opens and parses the safetensors file before the eviction: reading its header faults in a readahead window, and
  // where the disk's read_ahead_kb is large (8 MiB on some virtual disks) that window is the whole 4 MiB file, which
  // the prefetch below would then rightly find resident.
  EXPECT_EQ(w.get("st.w").numel(), big.numel());
  if (!evict(dir / "model.safetensors") || !evict(dir / "offload" / "dat.w.dat"))
    GTEST_SKIP() << "this filesystem keeps evicted pages";

  EXPECT_TRUE(w.prefetch("st.w")) << "had to read; resident before: " << resident_fraction(dir / "model.safetensors");
  EXPECT_TRUE(becomes_resident(dir / "model.safetensors"));
  EXPECT_FALSE(w.prefetch("st.w"));  // already resident: nothing to do
  EXPECT_TRUE(w.prefetch("dat.w"));
  EXPECT_TRUE(becomes_resident(dir / "offload" / "dat.w.dat"));
  EXPECT_FALSE(w.prefetch("dat.w"));
  // Through a prefix, as hooks call it.
  ASSERT_TRUE(evict(dir / "offload" / "dat.w.dat"));
  PrefixedDataset(std::make_shared<OffloadedWeightsLoader>(ram, dir / "offload"), "dat").prefetch("w");
  EXPECT_TRUE(becomes_resident(dir / "offload" / "dat.w.dat"));
  // Advice only: RAM weights and unknown or broken entries are no-ops, get() reports problems as before.
  EXPECT_FALSE(w.prefetch("ram.w"));
  EXPECT_FALSE(w.prefetch("no.such.weight"));
  fs::remove(dir / "offload" / "dat.w.dat");
  EXPECT_FALSE(w.prefetch("dat.w"));
  EXPECT_THROW(w.get("dat.w"), Error);
}

TEST(Offload, OffloadStateDictWritesEverythingAndTheLoaderPrefersRam) {
  TempDir dir;
  StateDict disk;
  disk.insert("a", bit_pattern({2}, DType::F32, 1));
  disk.insert("b", bit_pattern({2}, DType::F32, 2));
  offload_state_dict(dir / "off", disk);
  StateDict ram;
  ram.insert("b", bit_pattern({2}, DType::F32, 9));
  ram.insert("r", bit_pattern({1}, DType::F32, 3));
  const OffloadedWeightsLoader w(ram, dir / "off");
  EXPECT_EQ(w.keys(), (std::vector<std::string>{"b", "r", "a"})) << "RAM keys first, each key once";
  EXPECT_EQ(w.size(), 3u);
  EXPECT_TRUE(w.get("b").is_same(ram.at("b"))) << "RAM wins";
  EXPECT_TRUE(same_bits(w.get("a"), disk.at("a")));
  EXPECT_TRUE(w.contains("a"));
  EXPECT_FALSE(w.contains("zz"));
  EXPECT_FERRY_ERROR(w.get("zz"), "zz: no weight of this name");
}

TEST(Offload, LoaderConstructionIsLinear) {
  // Accelerate's key merge is O(N*M) (accelerate#4280). Timed against itself in the same run rather than bounded in
  // seconds, so machine speed, the sanitizers and a busy host cancel out: one loader of 2 x 40960 keys against 256
  // loaders of 2 x 160 keys, the same keys in all, over similar spans. A linear merge takes about as long for both
  // (1.1-1.5x here, up to 3x with 5 processes on 2 cores: the large maps miss the caches more), a quadratic one
  // 100-250x as long. The bound, 32x, leaves a wide margin either way; the best of 3 runs keeps preemptions out.
  constexpr int kN = 40960, kParts = 256;
  struct Keys {
    StateDict ram;
    OffloadIndex index;
  };
  const Tensor t = Tensor::empty({1}, DType::F32);
  auto keys = [&](int n) {
    Keys k;
    for (int i = 0; i < n; ++i) {
      k.ram.insert("ram." + std::to_string(i), t);
      k.index["disk." + std::to_string(i)] = OffloadEntry{.dtype = DType::F32, .shape = Shape{1}};
    }
    return k;
  };
  // Seconds to build a loader from each of `inputs` (consumed); the loaders are destroyed after the clock stops.
  auto seconds_to_build = [](std::vector<Keys> inputs, std::size_t want_size) {
    std::vector<std::optional<OffloadedWeightsLoader>> loaders(inputs.size());
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < inputs.size(); ++i)
      loaders[i].emplace(std::move(inputs[i].ram), fs::path("/nonexistent"), std::move(inputs[i].index));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (const auto& w : loaders) EXPECT_EQ(w->size(), want_size);
    return s;
  };
  double whole = 1e9, parts = 1e9;
  for (int run = 0; run < 3; ++run) {
    std::vector<Keys> one, many;
    one.push_back(keys(kN));
    for (int i = 0; i < kParts; ++i) many.push_back(keys(kN / kParts));
    whole = std::min(whole, seconds_to_build(std::move(one), 2u * kN));
    parts = std::min(parts, seconds_to_build(std::move(many), 2u * kN / kParts));
  }
  EXPECT_LT(whole, 32 * parts) << "one loader of " << 2 * kN << " keys took " << whole << " s, " << kParts
                               << " of " << 2 * kN / kParts << " keys took " << parts << " s: the merge is not linear";
}

class MapOf : public WeightsMap {
 public:
  explicit MapOf(std::vector<std::string> keys) : keys_(std::move(keys)) {}
  Tensor get(const std::string& key) const override {
    for (std::size_t i = 0; i < keys_.size(); ++i)
      if (keys_[i] == key) return Tensor::from_vector(std::vector<float>{static_cast<float>(i)}, {1});
    throw Error("absent", key);
  }
  bool contains(const std::string& key) const override {
    return std::find(keys_.begin(), keys_.end(), key) != keys_.end();
  }
  std::vector<std::string> keys() const override { return keys_; }
  std::size_t size() const override { return keys_.size(); }

 private:
  std::vector<std::string> keys_;
};

TEST(Offload, PrefixedDatasetMatchesWholeComponents) {
  auto all = std::make_shared<MapOf>(std::vector<std::string>{"a.1.weight", "a.10.weight", "a.1.bias", "a.1x", "b"});
  const PrefixedDataset one(all, "a.1");
  EXPECT_EQ(one.prefix(), "a.1.");
  EXPECT_EQ(one.keys(), (std::vector<std::string>{"weight", "bias"})) << "a.10 and a.1x are not under a.1";
  EXPECT_EQ(one.size(), 2u);
  EXPECT_EQ(one.get("weight").item<float>(), 0.0f);
  EXPECT_TRUE(one.contains("bias"));
  const PrefixedDataset ten(all, "a.10.");
  EXPECT_EQ(ten.get("weight").item<float>(), 1.0f);
  EXPECT_FALSE(ten.contains("bias"));
  const PrefixedDataset nested(std::make_shared<PrefixedDataset>(all, "a"), "1");
  EXPECT_EQ(nested.keys(), (std::vector<std::string>{"weight", "bias"}));
  const PrefixedDataset root(all, "");
  EXPECT_EQ(root.size(), 5u);
}

TEST(Offload, RefusesMetaTensorsAndUnsafeNames) {
  TempDir dir;
  EXPECT_FERRY_ERROR(offload_weight(Tensor::empty({2}, DType::F32, Device::meta()), "m", dir.path()),
                     "cannot offload a tensor without data");
  EXPECT_FERRY_ERROR(offload_weight(bit_pattern({2}, DType::F32, 1), "../x", dir.path()), "cannot be stored");
}

// ---- crash safety ---------------------------------------------------------------------------------------------

constexpr int kChildEntries = 20000;

// Runs only inside the child process the next test starts: saves large indexes forever (each version's entries
// all carry the version number in their shape) and offloads a tensor before each, until it is killed.
TEST(OffloadAtomicChild, DISABLED_WritesIndexesUntilKilled) {
  const char* dir = std::getenv("FERRY_OFFLOAD_CHILD_DIR");
  if (!dir) GTEST_SKIP() << "only run as the child of Offload.KilledWriterLeavesThePreviousIndexIntact";
  for (int64_t version = 1;; ++version) {
    OffloadIndex index;
    offload_weight(bit_pattern({1024}, DType::F32, static_cast<uint8_t>(version)), "weight", dir, index);
    for (int i = 0; i < kChildEntries; ++i)
      index["model.layers." + std::to_string(i) + ".mlp.up_proj.weight"] =
          OffloadEntry{.dtype = DType::F32, .shape = Shape{version, 4096}};
    save_offload_index(index, dir);
    if (version == 1) iotest::write_bytes(fs::path(dir) / "started", "1");
  }
}

TEST(Offload, KilledWriterLeavesThePreviousIndexIntact) {
  TempDir dir;
  OffloadIndex initial;
  offload_weight(bit_pattern({4}, DType::F32, 7), "initial", dir.path(), initial);
  save_offload_index(initial, dir.path());
  std::mt19937 rng(std::random_device{}());
  int complete_versions_seen = 0;
  for (int round = 0; round < 4; ++round) {
    fs::remove(dir / "started");
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::setenv("FERRY_OFFLOAD_CHILD_DIR", dir.path().c_str(), 1);
      const int null_fd = ::open("/dev/null", O_WRONLY);  // keep the child's gtest chatter out of the log
      ::dup2(null_fd, 1);
      ::dup2(null_fd, 2);
      const char* argv[] = {"ferry_io_tests", "--gtest_filter=OffloadAtomicChild.DISABLED_WritesIndexesUntilKilled",
                            "--gtest_also_run_disabled_tests", nullptr};
      ::execv("/proc/self/exe", const_cast<char* const*>(argv));
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!fs::exists(dir / "started") && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // While the child writes, readers must never see a partial index either: poll it until the kill.
    const auto kill_at = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(std::uniform_int_distribution<int>(100, 700)(rng));
    int reads = 0, torn = 0;
    while (std::chrono::steady_clock::now() < kill_at) {
      const std::string text = iotest::read_bytes(dir / "index.json");
      const auto last = text.find_last_not_of(" \n");
      torn += text.empty() || text[0] != '{' || last == std::string::npos || text[last] != '}';
      ++reads;
    }
    EXPECT_EQ(torn, 0) << "a reader saw a partial index.json in " << torn << " of " << reads << " reads";
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child must still have been writing when killed";

    // The index parses, still holds the initial entry, and is one complete version (never a mix).
    OffloadIndex idx;
    ASSERT_NO_THROW(idx = load_offload_index(dir.path())) << "round " << round;
    ASSERT_TRUE(idx.count("initial"));
    if (idx.size() > 2) {
      ASSERT_EQ(idx.size(), kChildEntries + 2u);
      const int64_t version = (*idx.at("model.layers.0.mlp.up_proj.weight").shape)[0];
      for (const auto& [name, e] : idx) {
        if (name != "initial" && name != "weight") {
          ASSERT_EQ((*e.shape)[0], version) << name;
        }
      }
      ++complete_versions_seen;
    }
    // Every entry the index lists is complete on disk.
    for (const auto& [name, e] : idx) {
      if (name == "initial" || name == "weight") {
        EXPECT_NO_THROW(load_offloaded_weight(dir / (name + ".dat"), e));
      }
    }
  }
  EXPECT_GT(complete_versions_seen, 0) << "the child never finished a first index";
}

}  // namespace
}  // namespace ferry::io
