// Files written by PyTorch, safetensors and Accelerate themselves (tests/reference/make_torch_fixtures.py, run with
// the reference venv from scripts/venv), read by ferry; and files ferry writes, read back by them. Skipped, with
// the reason, when the venv is absent. Also: a .bin whose pickle CPython's own pickler wrote (fuzz seed).
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "ferry/io/checkpoint.h"
#include "ferry/io/offload.h"
#include "ferry/io/safetensors.h"
#include "ferry/io/torch_bin.h"
#include "io/io_test_util.h"

namespace fs = std::filesystem;

namespace ferry::io {
namespace {

using iotest::TempDir;

const fs::path kSource = FERRY_SOURCE_DIR;

// Runs a command; returns its exit status and output.
std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string shell_quote(const fs::path& p) { return "'" + p.string() + "'"; }

// The venv's python when it exists and imports torch; empty otherwise.
std::string reference_python() {
  const fs::path py = kSource / ".venv" / "bin" / "python";
  if (!fs::exists(py)) return {};
  return run(shell_quote(fs::path(py)) + " -c 'import torch'").first == 0 ? py.string() : std::string{};
}

void expect_matches_manifest(const StateDict& sd, const nlohmann::json& entries, const fs::path& dir,
                             const std::string& file) {
  ASSERT_EQ(sd.size(), entries.size()) << file;
  for (const auto& [name, e] : entries.items()) {
    SCOPED_TRACE(file + ": " + name);
    ASSERT_TRUE(sd.contains(name));
    const Tensor& t = sd.at(name);
    EXPECT_EQ(std::string(safetensors_dtype_name(t.dtype())), e["dtype"].get<std::string>());
    EXPECT_EQ(t.shape(), e["shape"].get<Shape>());
    EXPECT_EQ(iotest::bytes_of(t), iotest::read_bytes(dir / e["raw"].get<std::string>())) << "bytes differ";
  }
  // Contiguous tensors that shared a storage in Python share one here (tied weights stay tied).
  for (const auto& [a, ea] : entries.items()) {
    for (const auto& [b, eb] : entries.items()) {
      if (a < b && ea["storage"] == eb["storage"] && ea["contiguous"].get<bool>() && eb["contiguous"].get<bool>() &&
          file.ends_with(".bin")) {
        EXPECT_TRUE(sd.at(a).shares_storage(sd.at(b))) << file << ": " << a << " and " << b;
      }
    }
  }
}

TEST(TorchReference, FilesWrittenByTorchSafetensorsAndAccelerateLoadBitExact) {
  const std::string py = reference_python();
  if (py.empty())
    GTEST_SKIP() << "no reference venv with torch at " << (kSource / ".venv").string()
                 << " (create it with scripts/venv); real torch.save files are not tested";
  TempDir dir;
  const std::string script = shell_quote(fs::path(py)) + " " +
                             shell_quote(kSource / "tests/reference/make_torch_fixtures.py");
  const auto [status, out] = run(script + " make " + shell_quote(dir.path()));
  ASSERT_EQ(status, 0) << out;
  const auto manifest = nlohmann::json::parse(iotest::read_bytes(dir / "expected.json"));
  for (const auto& [file, entries] : manifest["files"].items())
    expect_matches_manifest(load_state_dict(dir / file), entries, dir.path(), file);
  const StateDict plain = load_state_dict(dir / "plain.bin");
  EXPECT_TRUE(plain.at("embed.weight").is_same(plain.at("lm_head.weight"))) << "tied weights";
  EXPECT_FERRY_ERROR(load_torch_bin(dir / manifest["legacy"].get<std::string>()), "legacy (pre-1.6)");
  if (manifest.contains("accelerate_offload")) {
    const OffloadedWeightsLoader w({}, dir / "accelerate_offload");
    StateDict loaded;
    for (const auto& k : w.keys()) loaded.insert(k, w.get(k));
    expect_matches_manifest(loaded, manifest["accelerate_offload"], dir.path(), "accelerate_offload");
  }

  // And the other way: safetensors and Accelerate read what ferry writes.
  save_safetensors(plain, dir / "ferry.safetensors");
  offload_state_dict(dir / "ferry_offload", load_state_dict(dir / "dtypes.bin"));
  const auto [check_status, check_out] = run(script + " check " + shell_quote(dir.path()));
  EXPECT_EQ(check_status, 0) << check_out;
}

TEST(TorchReference, LoadsAPickleWrittenByCPythonsPickler) {
  // fuzz/make_seeds.py pickles a torch-shaped state dict with CPython's pickler (protocol 2) and zips it with
  // Python's zipfile (stored, unaligned): tied tensors, a Parameter wrapper, a transposed f16 view.
  const fs::path bin = kSource / "fuzz/corpus/fuzz_torch_bin/state_dict.bin";
  ASSERT_TRUE(fs::exists(bin)) << bin;
  const StateDict sd = load_torch_bin(bin);
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"embed.weight", "lm_head.weight", "proj.weight"}));
  EXPECT_EQ(sd.at("embed.weight").to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(sd.at("embed.weight").shares_storage(sd.at("lm_head.weight")));
  EXPECT_EQ(sd.at("proj.weight").dtype(), DType::F16);
  EXPECT_EQ(sd.at("proj.weight").to_vector<float>(), (std::vector<float>{1, 3, 2, 4}));
}

}  // namespace
}  // namespace ferry::io
