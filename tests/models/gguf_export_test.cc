// export_gguf (`ferry quantize`): files ferry writes load back in ferry as the source computes (f32), or as
// quantizing at load computes (the same quantizers and kernels), for Llama (q/k rows in llama.cpp's order, paired
// by interleaved RoPE when loaded: the same products in another order, ≤ 1e-5) and Qwen2 (tied head, biases:
// bit for bit); llama.cpp loads them and gives logits within the
// tolerance of two engines with 8-bit activations, and tokenizes an exported SentencePiece-style vocabulary as ferry
// tokenizes the folder (tests/reference/llama_cpp_logits.py; skipped without the reference venv); errors.
#include <gtest/gtest.h>

#include <fstream>

#include "ferry/io/gguf.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/gguf_model.h"
#include "ferry/nn/init.h"
#include "support/error_of.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

namespace fs = std::filesystem;

Tensor prompt() { return Tensor::from_vector(std::vector<int64_t>{3, 14, 15, 92, 65, 35, 89, 7}, {8}); }

nlohmann::json llama_config(int64_t hidden, int64_t intermediate) {
  nlohmann::json c = test::tiny_llama_config();
  c["hidden_size"] = hidden;
  c["intermediate_size"] = intermediate;
  return c;
}

TEST(ExportGguf, F32FileComputesWhatTheFolderComputes) {
  nlohmann::json qwen2 = test::tiny_qwen2_config();
  qwen2["use_sliding_window"] = false;  // GGUF has no sliding-window key for qwen2 (llama.cpp attends fully)
  for (const auto& [name, config] : {std::pair{std::string("llama"), test::tiny_llama_config()},
                                     std::pair{std::string("qwen2"), qwen2}}) {
    test::TempDir dir;
    nn::manual_seed(41);
    test::write_random_hf_folder(dir.path() / "hf", config);
    const auto report = export_gguf(dir.path() / "hf", dir.path() / "m.gguf", {.type = "f32"});
    EXPECT_EQ(report.tensors_per_type.count("f32"), 1u) << name;
    SCOPED_TRACE(name);
    auto folder = AutoModelForCausalLM::from_pretrained(dir.path() / "hf");
    auto file = AutoModelForCausalLM::from_pretrained(dir.path() / "m.gguf");
    // Llama files keep llama.cpp's q/k order, paired by interleaved RoPE: the same products in another order.
    const double tol = name == "llama" ? 1e-5 : 0.0;
    EXPECT_LE(test::max_abs_diff(file->logits(prompt()), folder->logits(prompt())), tol) << name;
    // A GGUF source round-trips too.
    export_gguf(dir.path() / "m.gguf", dir.path() / "again.gguf", {.type = "f32"});
    auto again = AutoModelForCausalLM::from_pretrained(dir.path() / "again.gguf");
    EXPECT_LE(test::max_abs_diff(again->logits(prompt()), folder->logits(prompt())), tol) << name;
  }
}

TEST(ExportGguf, QuantizedFileComputesWhatQuantizingAtLoadComputes) {
  test::TempDir dir;
  nn::manual_seed(42);
  test::write_random_hf_folder(dir.path() / "hf", llama_config(64, 128));
  for (const auto& [type, dtype] : {std::pair{std::string("q8_0"), DType::Q8_0}, {std::string("q4_1"), DType::Q4_1},
                                    {std::string("q5_0"), DType::Q5_0}}) {
    const fs::path out = dir.path() / (type + ".gguf");
    const auto report = export_gguf(dir.path() / "hf", out, {.type = type});
    EXPECT_EQ(report.tensors_per_type.at(type), 2 * 7 + 2) << type;  // 7 linears per layer, embedding, head
    auto file = AutoModelForCausalLM::from_pretrained(out);
    auto quantized = AutoModelForCausalLM::from_pretrained(dir.path() / "hf", {.quantize = dtype});
    EXPECT_LE(test::max_abs_diff(file->logits(prompt()), quantized->logits(prompt())), 1e-5) << type;
    EXPECT_EQ(io::GgufFile::open(out).tensor_info("blk.0.attn_q.weight").type, *ggml_type_of(dtype)) << type;
  }
}

TEST(ExportGguf, KQuantMixesPutTheHeadAndSomeLayersInQ6K) {
  test::TempDir dir;
  nn::manual_seed(43);
  test::write_random_hf_folder(dir.path() / "hf", llama_config(256, 512));
  export_gguf(dir.path() / "hf", dir.path() / "m.gguf", {.type = "q4_k_m"});
  const io::GgufFile f = io::GgufFile::open(dir.path() / "m.gguf");
  EXPECT_EQ(f.tensor_info("blk.1.attn_q.weight").type, GgmlType::Q4_K);
  EXPECT_EQ(f.tensor_info("output.weight").type, GgmlType::Q6_K);
  EXPECT_EQ(f.tensor_info("blk.1.ffn_down.weight").type, GgmlType::Q6_K);  // use_more_bits: the last eighth
  EXPECT_EQ(f.tensor_info("blk.0.ffn_down.weight").type, GgmlType::Q4_K);
  EXPECT_EQ(f.tensor_info("blk.0.attn_norm.weight").type, GgmlType::F32);
  EXPECT_EQ(f.get_int("general.file_type"), 15);
  auto file = AutoModelForCausalLM::from_pretrained(dir.path() / "m.gguf");
  auto exact = AutoModelForCausalLM::from_pretrained(dir.path() / "hf");
  const auto a = file->logits(prompt()).to_vector<float>(), b = exact->logits(prompt()).to_vector<float>();
  double e = 0, r = 0;
  for (std::size_t i = 0; i < a.size(); ++i) e += (a[i] - b[i]) * double(a[i] - b[i]), r += b[i] * double(b[i]);
  EXPECT_LT(std::sqrt(e / r), 0.1);
  std::printf("q4_k_m file vs the f32 folder: relative RMS of the logits %.4f\n", std::sqrt(e / r));
}

TEST(ExportGguf, LlamaCppLoadsWhatFerryWrites) {
  auto python = test::reference_python(FERRY_SOURCE_DIR);
  if (!python) GTEST_SKIP() << "no reference venv with llama-cpp-python (scripts/venv)";
  test::TempDir dir;
  nn::manual_seed(44);
  test::write_random_hf_folder(dir.path() / "hf", llama_config(256, 512));
  for (const std::string type : {"f32", "q8_0", "q4_k_m"}) {
    const fs::path out = dir.path() / (type + ".gguf");
    export_gguf(dir.path() / "hf", out, {.type = type});
    const fs::path json = dir.path() / (type + ".json");
    ASSERT_EQ(test::run_reference_script(*python, "llama_cpp_logits.py", {out.string(), json.string(), "3,14,15,92,65,35,89,7"},
                                         json.string() + ".log"),
              "");
    std::ifstream in(json);
    const auto want = nlohmann::json::parse(in)["logits"].get<std::vector<double>>();
    auto model = AutoModelForCausalLM::from_pretrained(out);
    auto cache = model->make_cache();
    const auto got = model->logits(prompt(), cache, 1).to_vector<float>();  // the last position, as llama.cpp's
    ASSERT_EQ(got.size(), want.size());
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < got.size(); ++i) diff = std::max(diff, std::abs(got[i] - want[i])), scale = std::max(scale, std::abs(want[i]));
    // f32: both engines exact up to summation order (measured ~1e-5); quantized: two ways of 8-bit activations.
    EXPECT_LE(diff, type == "f32" ? 1e-3 * scale : 0.05 * scale) << type;
    std::printf("%s: ferry vs llama.cpp on ferry's file, logits max diff %.2e (max |logit| %.2f)\n", type.c_str(), diff, scale);
  }
}

TEST(ExportGguf, WhatCannotBeWrittenIsRefusedByName) {
  test::TempDir dir;
  test::write_random_hf_folder(dir.path() / "gpt2", test::tiny_gpt2_config());
  std::string msg = test::error_of([&] { export_gguf(dir.path() / "gpt2", dir.path() / "x.gguf"); });
  EXPECT_NE(msg.find("not \"gpt2\""), std::string::npos) << msg;
  test::write_random_hf_folder(dir.path() / "llama", test::tiny_llama_config());
  msg = test::error_of([&] { export_gguf(dir.path() / "llama", dir.path() / "x.gguf", {.type = "q3_k"}); });
  EXPECT_NE(msg.find("unknown GGUF type"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir.path() / "x.gguf"));
}

}  // namespace
}  // namespace ferry::models
