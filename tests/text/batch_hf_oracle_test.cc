// Batched generation against transformers: generate() on a left-padded batch with an attention_mask
// (tests/reference/hf_batch_generate.py) gives the same greedy ids per sequence as ferry's BatchGenerator running
// the same prompts, with no padding, in batches of 2 (so sequences also join and leave). The folders are the f32
// ones of the model reference tests (transformers' save_pretrained, build/hf_reference).
//
// Needs the reference venv (scripts/venv, or FERRY_PYTHON); skipped with that hint otherwise.
#include <gtest/gtest.h>

#include <fstream>

#include "ferry/models/auto_model.h"
#include "ferry/text/batch_generate.h"
#include "support/hf_folder.h"

namespace ferry::text {
namespace {

namespace fs = std::filesystem;

TEST(BatchGenerateHfOracle, LeftPaddedTransformersBatchGivesTheSameGreedyIds) {
  const auto python = test::reference_python(FERRY_SOURCE_DIR);
  if (!python) GTEST_SKIP() << "no reference python: run scripts/venv, or set FERRY_PYTHON, to compare with transformers";
  const fs::path root = fs::path(FERRY_BINARY_DIR) / "hf_reference";
  const fs::path scripts = fs::path(FERRY_SOURCE_DIR) / "tests" / "reference";
  test::make_reference_folders(*python, scripts, root, test::reference_cases());

  const std::vector<std::vector<TokenId>> prompts = {
      {5, 17, 3, 88, 42, 42, 0, 95, 61, 7, 30}, {9, 8, 7, 6}, {77}, {4, 4, 4, 50, 51, 52, 53}, {12, 99, 1}};
  const std::vector<std::string> folders = {"llama_gqa_tied_f32", "llama_mha_bias_headdim24_f32",
                                            "qwen2_bias_sliding_f32", "mistral_sliding_f32", "gpt2_f32", "gptj_f32"};
  constexpr int kNewTokens = 10;
  test::TempDir dir;
  nlohmann::json prompts_json = prompts;
  std::vector<std::string> args = {(dir.path() / "hf.json").string(), "--prompts", prompts_json.dump(),
                                   "--max-new-tokens", std::to_string(kNewTokens)};
  for (const auto& f : folders) args.push_back((root / f).string());
  const std::string failed = test::run_reference_script(*python, "hf_batch_generate.py", args, dir.path() / "log");
  ASSERT_TRUE(failed.empty()) << failed;
  nlohmann::json want;
  std::ifstream(dir.path() / "hf.json") >> want;

  for (const auto& f : folders) {
    auto model = models::AutoModelForCausalLM::from_pretrained(root / f);
    BatchGenerator gen(*model, nullptr, {.max_batch_size = 2});
    GenerateOptions o;
    o.stop.max_new_tokens = kNewTokens;
    for (const auto& p : prompts) gen.add(p, o);
    const auto results = gen.run();
    ASSERT_EQ(results.size(), prompts.size()) << f;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_TRUE(results[i].ok()) << f << ": " << results[i].error;
      EXPECT_EQ(results[i].result.generated_ids, want[f][i].get<std::vector<TokenId>>()) << f << " prompt " << i;
    }
  }
}

}  // namespace
}  // namespace ferry::text
