// Tiny Hugging Face model folders for tests.
//
// Two sources:
//  - transformers itself (tests/reference/hf_make_folder.py + hf_logits.py, run by the reference venv's python):
//    authentic folders plus golden logits. make_reference_folders() runs the scripts once per build and caches the
//    result under the build folder, keyed by the scripts and the case list.
//  - ferry itself (write_random_hf_folder): a model built by AutoModelForCausalLM::from_config with random weights,
//    saved as config.json + model.safetensors the way save_pretrained lays it out. For tests that need no Python.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/core/dtype.h"
#include "ferry/models/causal_lm.h"
#include "ferry/models/seq2seq_lm.h"

namespace ferry::test {

/// A fresh empty folder under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "ferry-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

/// The reference venv's interpreter: $FERRY_PYTHON when set, else <source_dir>/.venv/bin/python; nullopt when
/// that file does not exist (tests then GTEST_SKIP, saying how to create it: scripts/venv).
std::optional<std::filesystem::path> reference_python(const std::filesystem::path& source_dir);

/// Runs tests/reference/`script` with `python` and `args` (each single-quoted for the shell), its output into
/// `log`. Returns "" when it exits 0, else the command line, for the test's failure message.
std::string run_reference_script(const std::filesystem::path& python, const std::string& script,
                                 const std::vector<std::string>& args, const std::filesystem::path& log);

/// One folder for hf_make_folder.py.
struct HfCase {
  std::string name;          // folder name
  std::string architecture;  // "LlamaForCausalLM", "GPT2LMHeadModel", ...
  std::string dtype;         // "float32", "float16", "bfloat16"
  nlohmann::json config;     // config keyword arguments (sizes, biases, rope, sliding window)
  std::string format = "safetensors";  // "safetensors", "sharded", "bin" or "base_model" (no base_model_prefix)
};

/// The cases the reference tests run: GQA and MHA, tied and untied, biases, rope_scaling llama3 and linear, sliding
/// windows, GPT-2, GPT-J; f32, f16 and bf16; one sharded and one pytorch_model.bin folder.
std::vector<HfCase> reference_cases();

/// Makes every case's folder (root/<name>) and golden logits (root/<name>.golden.safetensors) with transformers,
/// unless a previous run with the same scripts and cases left them in `root`. Safe to call from several processes
/// at once (a lock file serialises them). Throws std::runtime_error with the scripts' output when they fail.
void make_reference_folders(const std::filesystem::path& python, const std::filesystem::path& scripts_dir,
                            const std::filesystem::path& root, const std::vector<HfCase>& cases);

/// Builds `config` (a config.json object) with random weights of `dtype` and writes it to `folder` as config.json
/// plus model.safetensors (tied tensors once, under their first name, as save_pretrained does), or as shards of at
/// most `max_shard_bytes` with an index when that is nonzero. Returns the model it wrote.
std::shared_ptr<models::CausalLM> write_random_hf_folder(const std::filesystem::path& folder,
                                                         const nlohmann::json& config, DType dtype = DType::F32,
                                                         std::size_t max_shard_bytes = 0);

/// Small configs for write_random_hf_folder and structure tests (vocab 96, hidden 32, 2 layers).
/// The same for an encoder-decoder config (T5): built with AutoModelForSeq2SeqLM.
std::shared_ptr<models::Seq2SeqLM> write_random_seq2seq_folder(const std::filesystem::path& folder,
                                                               const nlohmann::json& config, DType dtype = DType::F32);
nlohmann::json tiny_t5_config();
/// Every decoder-only family's tiny config with its name: llama, mistral, qwen2, gpt2, gptj.
std::vector<std::pair<std::string, nlohmann::json>> tiny_causal_configs();      // T5 v1.1-style: gated-gelu, untied head, 2 encoder + 3 decoder layers
nlohmann::json tiny_llama_config();   // GQA 4/2 heads, untied
nlohmann::json tiny_mistral_config(); // sliding_window 3
nlohmann::json tiny_qwen2_config();   // q/k/v biases, tied, sliding window on layer 1
nlohmann::json tiny_qwen3_config();   // Qwen2 + q/k norms per head, head_dim 12 (not 32 / 4)
nlohmann::json tiny_gpt2_config();
nlohmann::json tiny_gptj_config();    // rotary_dim 4 of head 8
nlohmann::json tiny_gpt_neox_config();   // rotary_pct 0.5: 4 of head 8 rotate; parallel residual, untied embed_out
nlohmann::json tiny_opt_config();        // pre-LayerNorm, relu, tied; positions at offset 2
nlohmann::json tiny_mixtral_config();    // Mistral + 6 experts, top-2, under block_sparse_moe
nlohmann::json tiny_qwen2_moe_config();  // Qwen2 + 6 experts, top-3, shared expert; 3 layers, the middle one dense
nlohmann::json tiny_qwen3_moe_config();  // Qwen3 + 6 experts, top-2, norm_topk_prob
nlohmann::json tiny_phi3_config();       // GQA 4/2, 4 of head 8 rotate, LongRoPE (short factors up to 64), window 5
nlohmann::json tiny_bloom_config();      // ALiBi over 6 heads of 4 (not a power of two), tied
nlohmann::json tiny_gemma2_config();     // 3 layers, head 8 ≠ 32 / 4, window 5 on layers 0 and 2, soft-capping
nlohmann::json tiny_gemma3_config();     // 3 layers (global: layer 1), q/k norms, local/global RoPE, linear scaling

/// max |a - b| over all elements (both converted to f32); the shapes must match (else +inf).
double max_abs_diff(const Tensor& a, const Tensor& b);
/// max |x|.
double max_abs(const Tensor& x);

}  // namespace ferry::test
