// Checkpoint loading speed against the speed of reading the same bytes (`cat shards > /dev/null`), measured in the
// same run: a sharded safetensors checkpoint (2 GiB by default) is written to a temporary folder under /tmp,
// benchmarked, and deleted.
//
//   Read          read() every shard sequentially in 1 MiB blocks (the baseline: what `cat` does)
//   Views         open every shard and take every tensor in its own dtype (zero-copy: should be ~free)
//   ViewsTouch    the same, then read every byte of every view through the mapping (the real cost of using them)
//   Cast/<to>     open every shard and convert every tensor (bf16 -> f32 for a bf16 checkpoint, f32 -> bf16 for
//                 an f32 one) into a newly allocated tensor, all kept until the clock stops (a load into a model
//                 of another dtype; the new memory's first-touch page faults are part of the cost)
//   Paired        six rounds of Read, Cast and CastInto timed back to back; the medians of the per-round ratios
//                 (the figures to trust on a machine whose speeds drift)
//   CastInto      the same conversion into one reused destination (SafetensorsFile::read_into): reading +
//                 converting without the allocation, e.g. into preallocated parameters or a staging buffer
//   FreshTouch    no file at all: allocate tensors of the cast's output size and write one byte per 4 KiB page,
//                 kept like Cast's. This is what the kernel charges for new memory (faults and zeroing), which
//                 any loader returning new tensors of that size pays; Read / FreshTouch is therefore the highest
//                 ratio a Cast can reach on this machine, whatever its conversion and I/O cost.
//   FreshTouchIdle  the same after 3 s of sleep (not timed). On a VM whose balloon reports free pages to the host
//                 (virtio-balloon free page reporting, ~2 s after a free), memory freed that long ago has been taken
//                 back by the host, and touching it again costs a host fault per page. A cold load, which waits on
//                 the disk for about a second, gets such memory for its output; a warm one, run right after the
//                 previous round freed its tensors, mostly does not.
// Each runs "warm" (files in the page cache) and "cold" (each shard evicted with posix_fadvise(DONTNEED) before
// every iteration: only our files, nothing system-wide). Ratios = baseline time / time (>= 1 is at least as fast
// as reading the bytes; the target for casts is >= 0.9).
//
// Run: build-*/bench/bench_io_load [--gib=2] [--shard_mib=512] [--dir=/tmp] [benchmark flags]
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/thread_pool.h"
#include "ferry/io/safetensors.h"

namespace fs = std::filesystem;
using namespace ferry;

namespace {

struct Config {
  double gib = 2;
  std::size_t shard_mib = 512;
  std::string dir = "/tmp";
} config;

struct Checkpoint {
  DType dtype = DType::BF16;
  std::vector<fs::path> shards;
  std::size_t bytes = 0;
};

fs::path g_root;
std::map<std::string, Checkpoint> g_checkpoints;  // "bf16", "f32"
std::map<std::string, double> g_best;             // benchmark name -> best seconds per iteration

// Deterministic finite values in [0.5, 2) with random signs: bf16 and f32 bit patterns from xorshift.
void fill(Tensor& t, uint64_t& s) {
  auto next = [&s] { return s ^= s << 13, s ^= s >> 7, s ^= s << 17; };
  if (t.dtype() == DType::BF16) {
    auto* p = t.data_as<uint16_t>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint16_t>((next() & 0x807F) | 0x3F00);
  } else {
    auto* p = t.data_as<uint32_t>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint32_t>((next() & 0x807FFFFF) | 0x3F000000);
  }
}

Checkpoint make_checkpoint(const fs::path& dir, DType dtype) {
  fs::create_directories(dir);
  const std::size_t total = static_cast<std::size_t>(config.gib * (1ull << 30));
  const std::size_t shard_bytes = config.shard_mib << 20;
  const int64_t cols = 4096, rows = static_cast<int64_t>((16u << 20) / (cols * dtype_size(dtype)));  // 16 MiB tensors
  const std::size_t tensor_bytes = static_cast<std::size_t>(rows * cols) * dtype_size(dtype);
  const std::size_t per_shard = std::max<std::size_t>(1, shard_bytes / tensor_bytes);
  const std::size_t n_tensors = std::max<std::size_t>(1, total / tensor_bytes);
  const std::size_t n_shards = (n_tensors + per_shard - 1) / per_shard;
  Checkpoint ck{dtype, {}, 0};
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  for (std::size_t s = 0, t = 0; s < n_shards; ++s) {
    io::StateDict sd;
    for (std::size_t k = 0; k < per_shard && t < n_tensors; ++k, ++t) {
      Tensor w = Tensor::empty({rows, cols}, dtype);
      fill(w, seed);
      sd.insert("model.layers." + std::to_string(t) + ".weight", w);
    }
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, n_shards);
    io::save_safetensors(sd, dir / name);
    for (const auto& [n, w] : sd) weight_map[n] = name;
    ck.shards.push_back(dir / name);
    ck.bytes += sd.total_bytes();
    // Clean pages can be evicted for the cold runs.
    const int fd = ::open((dir / name).c_str(), O_RDONLY);
    ::fsync(fd);
    ::close(fd);
  }
  nlohmann::json index = {{"metadata", {{"total_size", ck.bytes}}}, {"weight_map", weight_map}};
  FILE* f = std::fopen((dir / "model.safetensors.index.json").c_str(), "w");
  const std::string text = index.dump(2);
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  return ck;
}

void evict(const Checkpoint& ck) {
  for (const auto& s : ck.shards) {
    const int fd = ::open(s.c_str(), O_RDONLY);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

uint64_t read_all(const Checkpoint& ck) {
  static std::vector<char> buf(1 << 20);
  uint64_t n = 0;
  for (const auto& s : ck.shards) {
    const int fd = ::open(s.c_str(), O_RDONLY);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    ssize_t r;
    while ((r = ::read(fd, buf.data(), buf.size())) > 0) n += static_cast<uint64_t>(r);
    ::close(fd);
  }
  return n;
}

uint64_t views(const Checkpoint& ck, bool touch) {
  uint64_t sum = 0;
  for (const auto& s : ck.shards) {
    const io::StateDict sd = io::load_safetensors(s);
    if (!touch) {
      sum += sd.size();
      continue;
    }
    for (const auto& [name, t] : sd) {
      // Four independent sums so the loop runs at memory speed, not at one dependent add per word.
      const auto* p = static_cast<const uint64_t*>(t.raw_data());
      const std::size_t words = t.nbytes() / 8;
      uint64_t a = 0, b = 0, c = 0, d = 0;
      for (std::size_t i = 0; i + 4 <= words; i += 4) a += p[i], b += p[i + 1], c += p[i + 2], d += p[i + 3];
      sum += a + b + c + d;
    }
  }
  return sum;
}

uint64_t cast_into(const Checkpoint& ck, DType to) {
  uint64_t sum = 0;
  Tensor dst;
  for (const auto& s : ck.shards) {
    const io::SafetensorsFile f = io::SafetensorsFile::open(s);
    for (const auto& e : f.entries()) {
      if (!dst.defined() || dst.shape() != e.shape) dst = Tensor::zeros(e.shape, to);
      f.read_into(e.name, dst);
      sum += *static_cast<const uint8_t*>(dst.raw_data());
    }
  }
  return sum;
}

// What a load produces stays alive until the timing ends, as a loaded model would hold it: freeing each tensor right
// away would let the allocator hand the same pages to the next one (glibc reuses freed chunks below its mmap
// threshold), which no real load gets. Released after the clock stops.
std::vector<Tensor> g_loaded;

uint64_t cast(const Checkpoint& ck, DType to) {
  uint64_t sum = 0;
  for (const auto& s : ck.shards) {
    const io::SafetensorsFile f = io::SafetensorsFile::open(s);
    for (const auto& e : f.entries()) {
      g_loaded.push_back(f.get(e.name, to));
      sum += *static_cast<const uint8_t*>(g_loaded.back().raw_data());
    }
  }
  return sum;
}

uint64_t fresh_touch(const Checkpoint& ck, DType to) {
  uint64_t sum = 0;
  for (const auto& s : ck.shards) {
    const io::SafetensorsFile f = io::SafetensorsFile::open(s);
    for (const auto& e : f.entries()) {
      g_loaded.push_back(Tensor::empty(e.shape, to));
      auto* p = static_cast<uint8_t*>(g_loaded.back().raw_data());
      const auto bytes = static_cast<int64_t>(g_loaded.back().nbytes());
      // Both threads, as the casts' conversion runs on both (the kernel zeroes a page on the core that faults it).
      parallel_for(0, bytes, 1 << 21, [p](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; i += 4096) p[i] = 1;
      });
      sum += p[0];
    }
  }
  return sum;
}

enum class Kind { Read, Views, ViewsTouch, Cast, CastInto, FreshTouch, FreshTouchIdle };

// One checkpoint on disk at a time (disk space is limited): written when its first benchmark runs.
const Checkpoint& checkpoint(const std::string& name) {
  static std::string current;
  if (current != name) {
    if (!current.empty()) fs::remove_all(g_root / current);
    const auto t0 = std::chrono::steady_clock::now();
    g_checkpoints[name] = make_checkpoint(g_root / name, name == "bf16" ? DType::BF16 : DType::F32);
    std::fprintf(stderr, "wrote %s checkpoint: %zu shards, %.2f GB in %.1f s\n", name.c_str(),
                 g_checkpoints[name].shards.size(), g_checkpoints[name].bytes / 1e9,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    current = name;
  }
  return g_checkpoints.at(name);
}

void run(benchmark::State& state, const std::string& name, const std::string& ck_name, Kind kind, bool cold) {
  const Checkpoint& ck = checkpoint(ck_name);
  const DType to = ck.dtype == DType::BF16 ? DType::F32 : DType::BF16;
  double best = 1e30;
  for (auto _ : state) {
    if (cold || kind == Kind::FreshTouchIdle) {
      state.PauseTiming();
      if (cold) evict(ck);
      if (kind == Kind::FreshTouchIdle) std::this_thread::sleep_for(std::chrono::seconds(3));
      state.ResumeTiming();
    }
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t r = 0;
    switch (kind) {
      case Kind::Read: r = read_all(ck); break;
      case Kind::Views: r = views(ck, false); break;
      case Kind::ViewsTouch: r = views(ck, true); break;
      case Kind::Cast: r = cast(ck, to); break;
      case Kind::CastInto: r = cast_into(ck, to); break;
      case Kind::FreshTouch:
      case Kind::FreshTouchIdle: r = fresh_touch(ck, to); break;
    }
    benchmark::DoNotOptimize(r);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    state.PauseTiming();
    g_loaded.clear();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * ck.bytes));
  g_best[name] = best;
}

// The casts against read() in alternation: each round times read, cast and cast-into back to back (evicting
// before each when cold), so every ratio compares windows seconds apart; the medians over rounds go in the table.
// The order rotates: on this VM the host keeps its own cache of the disk image, so whatever runs first after an
// eviction can pay more than the others.
// This VM's disk and memory speeds drift by tens of percent between minutes, which best-of-3 runs measured one
// benchmark after the other do not cancel.
struct PairedRatios {
  double cast = 0, cast_into = 0, fresh = 0;  // medians of read time / time
};
std::map<std::string, PairedRatios> g_paired;

void paired(benchmark::State& state, const std::string& name, const std::string& ck_name, bool cold) {
  const Checkpoint& ck = checkpoint(ck_name);
  const DType to = ck.dtype == DType::BF16 ? DType::F32 : DType::BF16;
  std::vector<double> cast_ratio, into_ratio, fresh_ratio;
  auto timed = [&](auto&& fn) {
    if (cold) evict(ck);
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(fn());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    g_loaded.clear();
    return seconds;
  };
  int round = 0;
  for (auto _ : state) {
    double t[4];  // read, cast, cast-into, fresh-touch; the order rotates each round so none always runs first
    for (int k = 0; k < 4; ++k) {
      const int which = (k + round) % 4;
      t[which] = which == 0   ? timed([&] { return read_all(ck); })
                 : which == 1 ? timed([&] { return cast(ck, to); })
                 : which == 2 ? timed([&] { return cast_into(ck, to); })
                              : timed([&] { return fresh_touch(ck, to); });
    }
    ++round;
    cast_ratio.push_back(t[0] / t[1]);
    into_ratio.push_back(t[0] / t[2]);
    fresh_ratio.push_back(t[0] / t[3]);
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const PairedRatios r{median(cast_ratio), median(into_ratio), median(fresh_ratio)};
  state.counters["cast_ratio_median"] = r.cast;
  state.counters["cast_into_ratio_median"] = r.cast_into;
  state.counters["fresh_touch_ratio_median"] = r.fresh;
  g_paired[name] = r;
}

std::string bench_name(const std::string& ck, const char* what, bool cold) {
  return std::string(cold ? "cold/" : "warm/") + ck + "/" + what;
}

void register_all() {
  for (const auto& ck : {std::string("bf16"), std::string("f32")}) {
    const std::string cast_name = ck == "bf16" ? "Cast_to_f32" : "Cast_to_bf16";
    for (bool cold : {false, true}) {
      const std::pair<const char*, Kind> kinds[] = {{"Read", Kind::Read},
                                                    {"Views", Kind::Views},
                                                    {"ViewsTouch", Kind::ViewsTouch},
                                                    {nullptr, Kind::Cast},
                                                    {"CastInto", Kind::CastInto},
                                                    {"FreshTouch", Kind::FreshTouch},
                                                    {"FreshTouchIdle", Kind::FreshTouchIdle}};
      for (const auto& [what, kind] : kinds) {
        if (cold && kind == Kind::FreshTouchIdle) continue;  // no file involved: once is enough
        const std::string name = bench_name(ck, what ? what : cast_name.c_str(), cold);
        benchmark::RegisterBenchmark(name.c_str(),
                                     [name, ck, kind = kind, cold](benchmark::State& s) { run(s, name, ck, kind, cold); })
            ->Iterations(3)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
      const std::string name = bench_name(ck, "Paired", cold);
      benchmark::RegisterBenchmark(name.c_str(), [name, ck, cold](benchmark::State& s) { paired(s, name, ck, cold); })
          ->Iterations(6)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

void report() {
  std::printf("\n## bench_io_load: %.1f GiB sharded safetensors (%zu MiB shards), %d threads\n\n", config.gib,
              config.shard_mib, num_threads());
  std::printf("Ratios are Read time / time (>= 1: at least as fast as read() of the same bytes). Best of 3, then the "
              "medians of 6 paired rounds.\n\n");
  std::printf("| checkpoint | cache | Read (cat) | Views | Touch | Cast | CastInto | FreshTouch | FreshTouchIdle | "
              "Cast, paired | CastInto, paired | FreshTouch, paired (Cast's ceiling) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& [ck_name, ck] : g_checkpoints) {
    const std::string cast_name = ck_name == "bf16" ? "Cast_to_f32" : "Cast_to_bf16";
    for (bool cold : {false, true}) {
      auto get = [&](const std::string& what) {
        auto it = g_best.find(bench_name(ck_name, what.c_str(), cold));
        return it == g_best.end() ? 0.0 : it->second;
      };
      const double read = get("Read");
      if (read <= 0) continue;
      const double gb = static_cast<double>(ck.bytes) / 1e9;
      auto ratio = [&](const std::string& what) {
        const double s = get(what);
        return s > 0 ? read / s : 0.0;
      };
      const auto idle = g_best.find(bench_name(ck_name, "FreshTouchIdle", false));
      const double idle_ratio = idle == g_best.end() ? 0.0 : read / idle->second;
      const auto it = g_paired.find(bench_name(ck_name, "Paired", cold));
      const PairedRatios p = it == g_paired.end() ? PairedRatios{} : it->second;
      std::printf("| %s %.2f GB | %s | %.0f ms (%.2f GB/s) | %.0fx | %.2fx | %.2fx | %.2fx | %.2fx | %.2fx | %.2fx | "
                  "%.2fx | %.2fx |\n",
                  ck_name.c_str(), gb, cold ? "cold" : "warm", read * 1e3, gb / read, ratio("Views"),
                  ratio("ViewsTouch"), ratio(cast_name), ratio("CastInto"), ratio("FreshTouch"), idle_ratio, p.cast,
                  p.cast_into, p.fresh);
    }
  }
  std::printf("\nCast is bf16 -> f32 for the bf16 checkpoint, f32 -> bf16 for the f32 one. FreshTouch allocates the "
              "cast's output and touches each page, nothing else: no cast into new tensors can beat it. "
              "FreshTouchIdle does the same after 3 s idle (memory a balloon may have returned to the host).\n");
}

struct RemoveRoot {
  ~RemoveRoot() {
    std::error_code ec;
    if (!g_root.empty()) fs::remove_all(g_root, ec);
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--gib=", 0) == 0) config.gib = std::stod(a.substr(6));
    else if (a.rfind("--shard_mib=", 0) == 0) config.shard_mib = std::stoul(a.substr(12));
    else if (a.rfind("--dir=", 0) == 0) config.dir = a.substr(6);
    else rest.push_back(argv[i]);
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  std::string tmpl = config.dir + "/ferry_bench_io_XXXXXX";
  if (!::mkdtemp(tmpl.data())) {
    std::perror("mkdtemp");
    return 1;
  }
  g_root = tmpl;
  RemoveRoot cleanup;
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  report();
  benchmark::Shutdown();
  return 0;
}
