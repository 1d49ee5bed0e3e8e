// llama.cpp as a test oracle for GGUF files: its own converter (convert_hf_to_gguf.py, through
// tests/reference/gguf_convert.py) turns a Hugging Face folder into a GGUF, and llama.cpp itself (llama-cpp-python,
// tests/reference/llama_cpp_logits.py) runs it. Both are pinned in the reference venv; tests deriving from
// LlamaCppOracleTest skip without it (scripts/venv).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ferry/models/causal_lm.h"

namespace ferry::test {

/// The last `max_chars` of a reference script's log, for a failure message.
std::string log_tail(const std::filesystem::path& log, std::size_t max_chars = 1500);

/// A fixture with the reference venv's python and llama.cpp's converter ($FERRY_LLAMA_CPP_CONVERTER, else the
/// venv's .venv/src/llama.cpp); SetUp skips the test when either is missing.
class LlamaCppOracleTest : public ::testing::Test {
 protected:
  void SetUp() override;

  /// `folder` converted by llama.cpp's converter to <folder>.<outtype>.gguf beside it (outtype f32, f16, bf16,
  /// q8_0). vocab_none records tokenizer.ggml.model = "none", so llama.cpp itself can load the file and run ids.
  std::filesystem::path convert(const std::filesystem::path& folder, const std::string& outtype,
                                bool vocab_none = true);

  /// llama.cpp on `gguf` with its KV cache in f32 (as ferry's): {"model", "logits" at the last position of `prompt`,
  /// and with `extra` options "greedy" ids} (llama_cpp_logits.py: --quantize=TYPE, --greedy=N).
  nlohmann::json run_llama_cpp(const std::filesystem::path& gguf, const std::vector<int64_t>& prompt,
                               const std::vector<std::string>& extra = {});

  std::optional<std::filesystem::path> python_;
  std::filesystem::path converter_;
};

/// ferry's logits at the last position of a prompt against another engine's.
struct ComparedLogits {
  double diff = 0;   // max |ferry - theirs|
  double scale = 0;  // max |theirs|
  bool same_greedy = false;
};
/// `model`'s logits at the last position of `prompt` against `want` (one value per vocabulary entry).
ComparedLogits compare_last_logits(models::CausalLM& model, const std::vector<int64_t>& prompt,
                                   const std::vector<double>& want);

/// `model` against llama.cpp's run `want` (run_llama_cpp with --greedy=N) on `prompt`: logits at the prompt within
/// `tolerance` of their scale, and its greedy ids step for step unless a step is a near tie (llama.cpp's token within
/// twice the prompt's logit difference of ferry's choice), at least half of them decisive. Prints what it measured.
void expect_greedy_like_llama_cpp(models::CausalLM& model, const std::vector<int64_t>& prompt,
                                  const nlohmann::json& want, const std::string& what, double tolerance = 1e-3);

}  // namespace ferry::test
