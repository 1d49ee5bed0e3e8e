// Tiny Hugging Face folders for tests: made by transformers (through the reference scripts, cached per build) or
// by ferry itself (random weights, save_pretrained's layout).
#include "support/hf_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>

#include "ferry/io/safetensors.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/config.h"

namespace ferry::test {

namespace fs = std::filesystem;

// ---- TempDir ----------------------------------------------------------------------------------------------------

TempDir::TempDir(const std::string& prefix) {
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path p = fs::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    if (fs::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  throw std::runtime_error("TempDir: cannot create a folder in " + fs::temp_directory_path().string());
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

// ---- the reference venv -----------------------------------------------------------------------------------------

std::optional<fs::path> reference_python(const fs::path& source_dir) {
  if (const char* env = std::getenv("FERRY_PYTHON"); env != nullptr && *env != '\0') {
    if (fs::exists(env)) return fs::path(env);
    return std::nullopt;
  }
  fs::path p = source_dir / ".venv" / "bin" / "python";
  if (fs::exists(p)) return p;
  return std::nullopt;
}

std::string run_reference_script(const fs::path& python, const std::string& script,
                                 const std::vector<std::string>& args, const fs::path& log) {
  std::string cmd = python.string() + " " + FERRY_SOURCE_DIR "/tests/reference/" + script;
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " > '" + log.string() + "' 2>&1";
  return std::system(cmd.c_str()) == 0 ? std::string() : cmd;
}

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `command` through the shell; returns its combined output, throws with it when the exit status is not 0.
std::string run(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run: " + command);
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe) != nullptr) output += buf.data();
  const int status = ::pclose(pipe);
  if (status != 0) throw std::runtime_error("command failed (status " + std::to_string(status) + "): " + command + "\n" + output);
  return output;
}

class FileLock {
 public:
  explicit FileLock(const fs::path& p) : fd_(::open(p.c_str(), O_CREAT | O_RDWR, 0644)) {
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) throw std::runtime_error("cannot lock " + p.string());
  }
  ~FileLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }

 private:
  int fd_;
};

nlohmann::json cases_json(const std::vector<HfCase>& cases) {
  nlohmann::json list = nlohmann::json::array();
  for (const HfCase& c : cases)
    list.push_back({{"name", c.name}, {"architecture", c.architecture}, {"dtype", c.dtype}, {"config", c.config},
                    {"format", c.format}});
  return list;
}

}  // namespace

void make_reference_folders(const fs::path& python, const fs::path& scripts_dir, const fs::path& root,
                            const std::vector<HfCase>& cases) {
  const fs::path make_script = scripts_dir / "hf_make_folder.py";
  const fs::path logits_script = scripts_dir / "hf_logits.py";
  const std::string list = cases_json(cases).dump();
  const fs::path helper_module = scripts_dir / "bf16_linear_inputs.py";  // imported by hf_logits.py
  const std::string key = std::to_string(std::hash<std::string>{}(read_file(make_script) + read_file(logits_script) +
                                                                  read_file(helper_module) + list + python.string()));
  const fs::path stamp = root / "stamp";
  auto up_to_date = [&] { return fs::exists(stamp) && read_file(stamp) == key; };
  if (up_to_date()) return;

  fs::create_directories(root.parent_path());
  FileLock lock(root.string() + ".lock");
  if (up_to_date()) return;  // another process made them while we waited
  fs::remove_all(root);
  fs::create_directories(root);
  write_file(root / "cases.json", list);
  run(quote(python.string()) + " " + quote(make_script.string()) + " --cases " + quote((root / "cases.json").string()) +
      " --out " + quote(root.string()));
  std::string folders;
  for (const HfCase& c : cases) folders += " " + quote((root / c.name).string());
  run(quote(python.string()) + " " + quote(logits_script.string()) + folders);
  write_file(stamp, key);
}

std::vector<HfCase> reference_cases() {
  using nlohmann::json;
  const json llama = {{"vocab_size", 128}, {"hidden_size", 64}, {"intermediate_size", 96},
                      {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                      {"max_position_embeddings", 128}, {"rms_norm_eps", 1e-5}};
  auto with = [](json base, const json& extra) {
    base.update(extra);
    return base;
  };
  const json gqa_tied = with(llama, {{"tie_word_embeddings", true}});
  const json mha_bias = with(llama, {{"num_key_value_heads", 4}, {"head_dim", 24}, {"attention_bias", true},
                                     {"mlp_bias", true}, {"tie_word_embeddings", false},
                                     {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 500.0}}}});
  const json llama3 = with(llama, {{"rope_parameters", {{"rope_type", "llama3"}, {"rope_theta", 10000.0},
                                                        {"factor", 8.0}, {"low_freq_factor", 1.0},
                                                        {"high_freq_factor", 4.0},
                                                        {"original_max_position_embeddings", 64}}}});
  const json linear = with(llama, {{"rope_parameters", {{"rope_type", "linear"}, {"rope_theta", 10000.0},
                                                        {"factor", 4.0}}}});
  const json mistral = with(llama, {{"sliding_window", 4}});
  const json qwen2 = with(llama, {{"use_sliding_window", true}, {"sliding_window", 5}, {"max_window_layers", 1},
                                  {"tie_word_embeddings", true}});
  // Qwen3: head_dim 24 (not 64 / 4), q/k norms; sliding windows on the upper layer; one untied with biases.
  const json qwen3 = with(qwen2, {{"head_dim", 24}});
  const json qwen3_bias =
      with(qwen3, {{"attention_bias", true}, {"tie_word_embeddings", false}, {"use_sliding_window", false}});
  // Mixtures of experts: 8 experts; Mixtral top-2 with sliding windows; Qwen2-MoE top-4 unnormalised with a shared
  // expert, its middle layer dense (mlp_only_layers); Qwen3-MoE top-2 normalised, head_dim 24, every layer sliding.
  const json mixtral = with(llama, {{"num_local_experts", 8}, {"num_experts_per_tok", 2}, {"sliding_window", 5}});
  const json qwen2_moe = with(llama, {{"num_hidden_layers", 3},
                                      {"num_experts", 8},
                                      {"num_experts_per_tok", 4},
                                      {"moe_intermediate_size", 40},
                                      {"shared_expert_intermediate_size", 56},
                                      {"mlp_only_layers", {1}},
                                      {"use_sliding_window", true},
                                      {"sliding_window", 5},
                                      {"max_window_layers", 3}});
  const json qwen3_moe = with(llama, {{"num_experts", 8},
                                      {"num_experts_per_tok", 2},
                                      {"moe_intermediate_size", 40},
                                      {"norm_topk_prob", true},
                                      {"head_dim", 24},
                                      {"use_sliding_window", true},
                                      {"sliding_window", 5}});
  const json gpt2 = {{"vocab_size", 128}, {"n_embd", 64}, {"n_layer", 2}, {"n_head", 4}, {"n_positions", 64}};
  const json gptj = {{"vocab_size", 128}, {"n_embd", 64}, {"n_layer", 2}, {"n_head", 4}, {"n_positions", 64},
                     {"rotary_dim", 8}};
  // GPT-NeoX: head size 16, rotary_pct 0.25 (4 dims), parallel residual, untied embed_out. Variants: sequential
  // residual without attention biases; the whole head rotated (theta 500) with a tied head; half the head rotated
  // under linear scaling, with gelu_fast (GPT-NeoX-20B's activation) and layer_norm_eps 1e-3.
  const json gpt_neox = {{"vocab_size", 128},        {"hidden_size", 64},       {"num_hidden_layers", 2},
                         {"num_attention_heads", 4}, {"intermediate_size", 96}, {"max_position_embeddings", 64},
                         {"rotary_pct", 0.25}};
  const json gpt_neox_sequential = with(gpt_neox, {{"use_parallel_residual", false}, {"attention_bias", false}});
  const json gpt_neox_full_tied =
      with(gpt_neox, {{"rotary_pct", 1.0}, {"rotary_emb_base", 500.0}, {"tie_word_embeddings", true}});
  const json gpt_neox_linear =
      with(gpt_neox, {{"rope_parameters", {{"rope_type", "linear"}, {"factor", 2.0}, {"partial_rotary_factor", 0.5}}},
                      {"hidden_act", "gelu_fast"},
                      {"layer_norm_eps", 1e-3}});
  // Phi-3: fused qkv_proj and gate_up_proj, GQA 4/2, head 16. Variants: half of each head rotated (the top-level
  // key) under a sliding window of 5 (shorter than the 11-token prompt); LongRoPE past original_max_position_embeddings
  // 8 from the prompt on (long factors in every forward; attention factor from 64 / 8), tied; LongRoPE with 12 of
  // 16 dims rotated (the dict's key), factor 3, and original_max_position_embeddings 16, which the decode steps cross
  // (short factors, then long).
  const json phi3 = {{"vocab_size", 128},
                     {"hidden_size", 64},
                     {"intermediate_size", 96},
                     {"num_hidden_layers", 2},
                     {"num_attention_heads", 4},
                     {"num_key_value_heads", 2},
                     {"max_position_embeddings", 64},
                     {"pad_token_id", nullptr}};
  const json phi3_partial_sliding = with(phi3, {{"partial_rotary_factor", 0.5}, {"sliding_window", 5}});
  const json phi3_longrope_long = with(phi3, {{"original_max_position_embeddings", 8},
                                              {"tie_word_embeddings", true},
                                              {"rope_parameters",
                                               {{"rope_type", "longrope"},
                                                {"rope_theta", 10000.0},
                                                {"short_factor", {1.0, 1.02, 1.05, 1.1, 1.2, 1.3, 1.4, 1.5}},
                                                {"long_factor", {1.0, 1.5, 2.5, 4.0, 6.0, 9.0, 14.0, 20.0}}}}});
  const json phi3_longrope_crossing = with(phi3, {{"original_max_position_embeddings", 16},
                                                  {"rope_parameters",
                                                   {{"rope_type", "longrope"},
                                                    {"rope_theta", 500.0},
                                                    {"partial_rotary_factor", 0.75},
                                                    {"factor", 3.0},
                                                    {"short_factor", {1.0, 1.1, 1.3, 1.6, 2.0, 2.5}},
                                                    {"long_factor", {1.2, 2.0, 3.5, 6.0, 10.0, 16.0}}}}});
  // Gemma 2: (1 + w) norms around attention and MLP, GQA 4/2 with head_dim 16 ≠ hidden / heads, √C-scaled
  // embedding, every other layer sliding (window 5, shorter than the 11-token prompt), attention scores soft-capped
  // at 4 (without it transformers' logits move by up to 5.8) and the final logits at 100 (uncapped they reach ~150),
  // query_pre_attn_scalar 24 ≠ head_dim; tied.
  const json gemma2 = {{"vocab_size", 128},
                       {"hidden_size", 64},
                       {"intermediate_size", 96},
                       {"num_hidden_layers", 3},
                       {"num_attention_heads", 4},
                       {"num_key_value_heads", 2},
                       {"head_dim", 16},
                       {"max_position_embeddings", 64},
                       {"sliding_window", 5},
                       {"query_pre_attn_scalar", 24},
                       {"attn_logit_softcapping", 4.0},
                       {"final_logit_softcapping", 100.0}};
  // Gemma 3: q/k norms per head, layers sliding, sliding, global, sliding (sliding_window_pattern 3), window 5,
  // separate RoPE bases (local 50, global 1000 with a linear factor 4, as rope_scaling in the Hub's configs), untied.
  // The bf16 variant has hidden 48, whose normaliser √48 = 6.928 rounds to 6.9375 in bf16, as transformers casts it.
  const json gemma3 = {{"vocab_size", 128},
                       {"hidden_size", 64},
                       {"intermediate_size", 96},
                       {"num_hidden_layers", 4},
                       {"num_attention_heads", 4},
                       {"num_key_value_heads", 2},
                       {"head_dim", 16},
                       {"max_position_embeddings", 64},
                       {"sliding_window", 5},
                       {"sliding_window_pattern", 3},
                       {"query_pre_attn_scalar", 20},
                       {"rope_theta", 1000.0},
                       {"rope_local_base_freq", 50.0},
                       {"rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}}},
                       {"tie_word_embeddings", false}};
  const json gemma3_h48 = with(gemma3, {{"hidden_size", 48}, {"tie_word_embeddings", true}});
  // OPT: pre-LayerNorm, relu, tied lm_head. Variants: opt-350m's shape (norms after the residual sums, no final
  // norm, word_embed_proj_dim 32 with project_in/out); no biases, untied, norms without affine parameters.
  const json opt = {{"vocab_size", 128},        {"hidden_size", 64}, {"num_hidden_layers", 2},
                    {"num_attention_heads", 4}, {"ffn_dim", 96},     {"max_position_embeddings", 64}};
  const json opt_350m = with(opt, {{"do_layer_norm_before", false}, {"word_embed_proj_dim", 32}});
  const json opt_plain =
      with(opt, {{"enable_bias", false}, {"tie_word_embeddings", false}, {"layer_norm_elementwise_affine", false}});
  // BLOOM: ALiBi, fused per-head query_key_value, tied lm_head, the hidden size as n_embed. Variants: 6 heads (not a
  // power of two: slopes of 4 heads, then 2 interleaved); 8 heads with the residual taken after the norms
  // (apply_residual_connection_post_layernorm), untied, eps 1e-3, f32 and bf16; 12 heads (slopes √2 apart) saved as
  // the bare BloomModel, as bigscience's uploads are (no "transformer." prefix). The bf16 case is not the 6-head one:
  // there (tied head, max |logit| 33) transformers' own f32 run with bf16-rounded linear inputs moves by 0.069 when
  // the embedding norm's output moves by less than an f32 ulp, 20x hf_reference_test's bound for that comparison.
  const json bloom = {{"vocab_size", 128}, {"n_embed", 48}, {"n_layer", 2}, {"n_head", 6}};
  const json bloom_post_ln = with(bloom, {{"n_embed", 64},
                                          {"n_head", 8},
                                          {"apply_residual_connection_post_layernorm", true},
                                          {"tie_word_embeddings", false},
                                          {"layer_norm_epsilon", 1e-3}});
  const json bloom_bare = with(bloom, {{"n_head", 12}, {"n_layer", 3}});

  std::vector<HfCase> cases;
  const std::vector<std::pair<std::string, std::string>> dtypes = {
      {"f32", "float32"}, {"f16", "float16"}, {"bf16", "bfloat16"}};
  for (const auto& [suffix, dtype] : dtypes) {
    cases.push_back({"llama_gqa_tied_" + suffix, "LlamaForCausalLM", dtype, gqa_tied});
    cases.push_back({"qwen2_bias_sliding_" + suffix, "Qwen2ForCausalLM", dtype, qwen2});
    cases.push_back({"qwen3_qknorm_sliding_" + suffix, "Qwen3ForCausalLM", dtype, qwen3});
    cases.push_back({"gpt2_" + suffix, "GPT2LMHeadModel", dtype, gpt2});
    cases.push_back({"gptj_" + suffix, "GPTJForCausalLM", dtype, gptj});
    cases.push_back({"gpt_neox_" + suffix, "GPTNeoXForCausalLM", dtype, gpt_neox});
    // OPT in bf16 is opt_350m_post_norm_proj_bf16: the base config's bf16 folder has, in decode step 8, one input
    // of layers.1.self_attn.out_proj within 2 f32 ulps of a bf16 rounding midpoint, which ferry's f32 attention
    // (an ulp away from torch's) rounds the other way: that row differs by 0.044 at max |logit| 63.5, every other
    // row by ≤ 4e-6 — the boundary crossing the top of hf_reference_test.cc describes, beyond its 1e-4 bound.
    if (suffix != "bf16") cases.push_back({"opt_" + suffix, "OPTForCausalLM", dtype, opt});
  }
  for (const auto& [suffix, dtype] : {std::pair<std::string, std::string>{"f32", "float32"}, {"bf16", "bfloat16"}}) {
    cases.push_back({"mixtral_top2_sliding_" + suffix, "MixtralForCausalLM", dtype, mixtral});
    cases.push_back({"qwen2_moe_shared_top4_" + suffix, "Qwen2MoeForCausalLM", dtype, qwen2_moe});
    cases.push_back({"qwen3_moe_top2_norm_" + suffix, "Qwen3MoeForCausalLM", dtype, qwen3_moe});
  }
  cases.push_back({"mixtral_sharded_f32", "MixtralForCausalLM", "float32", mixtral, "sharded"});
  cases.push_back({"llama_mha_bias_headdim24_f32", "LlamaForCausalLM", "float32", mha_bias});
  cases.push_back({"llama_rope_llama3_f32", "LlamaForCausalLM", "float32", llama3});
  cases.push_back({"llama_rope_linear_f32", "LlamaForCausalLM", "float32", linear});
  cases.push_back({"mistral_sliding_f32", "MistralForCausalLM", "float32", mistral});
  cases.push_back({"qwen3_bias_untied_f32", "Qwen3ForCausalLM", "float32", qwen3_bias});
  cases.push_back({"gpt_neox_sequential_nobias_f32", "GPTNeoXForCausalLM", "float32", gpt_neox_sequential});
  cases.push_back({"gpt_neox_rotary_full_tied_f32", "GPTNeoXForCausalLM", "float32", gpt_neox_full_tied});
  cases.push_back({"gpt_neox_rotary_half_linear_f32", "GPTNeoXForCausalLM", "float32", gpt_neox_linear});
  cases.push_back({"gpt_neox_sequential_nobias_bf16", "GPTNeoXForCausalLM", "bfloat16", gpt_neox_sequential});
  cases.push_back({"phi3_partial_sliding_f32", "Phi3ForCausalLM", "float32", phi3_partial_sliding});
  cases.push_back({"phi3_longrope_long_tied_f32", "Phi3ForCausalLM", "float32", phi3_longrope_long});
  cases.push_back({"phi3_longrope_crossing_partial_f32", "Phi3ForCausalLM", "float32", phi3_longrope_crossing});
  cases.push_back({"gemma2_softcap_sliding_f32", "Gemma2ForCausalLM", "float32", gemma2});
  cases.push_back({"gemma2_softcap_sliding_sharded_f32", "Gemma2ForCausalLM", "float32", gemma2, "sharded"});
  cases.push_back({"gemma3_qknorm_local_global_f32", "Gemma3ForCausalLM", "float32", gemma3});
  cases.push_back({"gemma3_h48_tied_bf16", "Gemma3ForCausalLM", "bfloat16", gemma3_h48});
  cases.push_back({"gemma2_softcap_sliding_bf16", "Gemma2ForCausalLM", "bfloat16", gemma2});
  cases.push_back({"phi3_longrope_long_tied_bf16", "Phi3ForCausalLM", "bfloat16", phi3_longrope_long});
  cases.push_back({"bloom_heads6_f32", "BloomForCausalLM", "float32", bloom});
  cases.push_back({"bloom_heads8_post_ln_untied_f32", "BloomForCausalLM", "float32", bloom_post_ln});
  cases.push_back({"bloom_heads12_bare_f32", "BloomForCausalLM", "float32", bloom_bare, "base_model"});
  cases.push_back({"bloom_heads8_post_ln_untied_bf16", "BloomForCausalLM", "bfloat16", bloom_post_ln});
  cases.push_back({"opt_350m_post_norm_proj_f32", "OPTForCausalLM", "float32", opt_350m});
  cases.push_back({"opt_nobias_untied_noaffine_f32", "OPTForCausalLM", "float32", opt_plain});
  cases.push_back({"opt_350m_post_norm_proj_bf16", "OPTForCausalLM", "bfloat16", opt_350m});
  cases.push_back({"mistral_sliding_bf16", "MistralForCausalLM", "bfloat16", mistral});
  cases.push_back({"llama_sharded_f32", "LlamaForCausalLM", "float32", llama, "sharded"});
  cases.push_back({"llama_bin_tied_f32", "LlamaForCausalLM", "float32", gqa_tied, "bin"});
  return cases;
}

// ---- folders written by ferry -----------------------------------------------------------------------------------

std::shared_ptr<models::CausalLM> write_random_hf_folder(const fs::path& folder, const nlohmann::json& config,
                                                         DType dtype, std::size_t max_shard_bytes) {
  fs::create_directories(folder);
  nlohmann::json cfg = config;
  cfg["torch_dtype"] = std::string(numpy_dtype_name(dtype));
  write_file(folder / "config.json", cfg.dump(2));
  auto model = models::AutoModelForCausalLM::from_config(models::ConfigJson::from_json(cfg), dtype);
  io::StateDict tensors;
  std::vector<Tensor> written;
  for (const auto& [name, tensor] : model->state_dict()) {
    bool tied = false;
    for (const Tensor& w : written) tied = tied || w.is_same(tensor);
    if (tied) continue;  // save_pretrained writes a tied tensor once, under its first name
    written.push_back(tensor);
    tensors.insert(name, tensor);
  }
  if (max_shard_bytes == 0)
    io::save_safetensors(tensors, folder / "model.safetensors");
  else
    io::save_sharded_safetensors(tensors, folder, max_shard_bytes);
  return model;
}

std::shared_ptr<models::Seq2SeqLM> write_random_seq2seq_folder(const fs::path& folder, const nlohmann::json& config,
                                                               DType dtype) {
  fs::create_directories(folder);
  nlohmann::json cfg = config;
  cfg["torch_dtype"] = std::string(numpy_dtype_name(dtype));
  write_file(folder / "config.json", cfg.dump(2));
  auto model = models::AutoModelForSeq2SeqLM::from_config(models::ConfigJson::from_json(cfg), dtype);
  io::StateDict tensors;
  std::vector<Tensor> written;
  for (const auto& [name, tensor] : model->state_dict()) {
    bool tied = false;
    for (const Tensor& w : written) tied = tied || w.is_same(tensor);
    if (tied) continue;
    written.push_back(tensor);
    tensors.insert(name, tensor);
  }
  io::save_safetensors(tensors, folder / "model.safetensors");
  return model;
}

std::vector<std::pair<std::string, nlohmann::json>> tiny_causal_configs() {
  return {{"llama", tiny_llama_config()},         {"mistral", tiny_mistral_config()},
          {"qwen2", tiny_qwen2_config()},         {"qwen3", tiny_qwen3_config()},
          {"gpt2", tiny_gpt2_config()},           {"gptj", tiny_gptj_config()},
          {"gpt_neox", tiny_gpt_neox_config()},   {"opt", tiny_opt_config()},
          {"mixtral", tiny_mixtral_config()},     {"qwen2_moe", tiny_qwen2_moe_config()},
          {"qwen3_moe", tiny_qwen3_moe_config()}, {"phi3", tiny_phi3_config()},
          {"bloom", tiny_bloom_config()},         {"gemma2", tiny_gemma2_config()},
          {"gemma3", tiny_gemma3_config()}};
}

nlohmann::json tiny_mixtral_config() {
  nlohmann::json c = tiny_mistral_config();
  c["architectures"] = {"MixtralForCausalLM"};
  c["model_type"] = "mixtral";
  c["num_local_experts"] = 6;
  c["num_experts_per_tok"] = 2;
  return c;
}

nlohmann::json tiny_qwen2_moe_config() {
  nlohmann::json c = tiny_qwen2_config();
  c["architectures"] = {"Qwen2MoeForCausalLM"};
  c["model_type"] = "qwen2_moe";
  c["num_hidden_layers"] = 3;
  c["num_experts"] = 6;
  c["num_experts_per_tok"] = 3;
  c["moe_intermediate_size"] = 16;
  c["shared_expert_intermediate_size"] = 24;
  c["mlp_only_layers"] = {1};
  return c;
}

nlohmann::json tiny_qwen3_moe_config() {
  nlohmann::json c = tiny_qwen3_config();
  c["architectures"] = {"Qwen3MoeForCausalLM"};
  c["model_type"] = "qwen3_moe";
  c["num_experts"] = 6;
  c["num_experts_per_tok"] = 2;
  c["moe_intermediate_size"] = 16;
  c["norm_topk_prob"] = true;
  return c;
}

nlohmann::json tiny_t5_config() {
  return {{"architectures", {"T5ForConditionalGeneration"}}, {"model_type", "t5"}, {"vocab_size", 96},
          {"d_model", 32}, {"d_kv", 8}, {"d_ff", 64}, {"num_layers", 2}, {"num_decoder_layers", 3}, {"num_heads", 4},
          {"relative_attention_num_buckets", 8}, {"relative_attention_max_distance", 20},
          {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}, {"eos_token_id", 1},
          {"pad_token_id", 0}, {"decoder_start_token_id", 0}};
}

nlohmann::json tiny_llama_config() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 96},
          {"hidden_size", 32}, {"intermediate_size", 48}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-5},
          {"tie_word_embeddings", false}};
}

nlohmann::json tiny_mistral_config() {
  nlohmann::json c = tiny_llama_config();
  c["architectures"] = {"MistralForCausalLM"};
  c["model_type"] = "mistral";
  c["sliding_window"] = 3;
  return c;
}

nlohmann::json tiny_qwen2_config() {
  nlohmann::json c = tiny_llama_config();
  c["architectures"] = {"Qwen2ForCausalLM"};
  c["model_type"] = "qwen2";
  c["tie_word_embeddings"] = true;
  c["use_sliding_window"] = true;
  c["sliding_window"] = 3;
  c["max_window_layers"] = 1;
  return c;
}

nlohmann::json tiny_qwen3_config() {
  nlohmann::json c = tiny_qwen2_config();
  c["architectures"] = {"Qwen3ForCausalLM"};
  c["model_type"] = "qwen3";
  c["head_dim"] = 12;  // not hidden_size / heads (8), as in Qwen3 checkpoints
  return c;
}

nlohmann::json tiny_gpt2_config() {
  return {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"vocab_size", 96}, {"n_embd", 32},
          {"n_layer", 2}, {"n_head", 4}, {"n_positions", 64}};
}

nlohmann::json tiny_gptj_config() {
  return {{"architectures", {"GPTJForCausalLM"}}, {"model_type", "gptj"}, {"vocab_size", 96}, {"n_embd", 32},
          {"n_layer", 2}, {"n_head", 4}, {"n_positions", 64}, {"rotary_dim", 4}};
}

nlohmann::json tiny_gpt_neox_config() {
  return {{"architectures", {"GPTNeoXForCausalLM"}},
          {"model_type", "gpt_neox"},
          {"vocab_size", 96},
          {"hidden_size", 32},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"intermediate_size", 48},
          {"max_position_embeddings", 64},
          {"rotary_pct", 0.5}};
}

nlohmann::json tiny_gemma2_config() {
  return {{"architectures", {"Gemma2ForCausalLM"}},
          {"model_type", "gemma2"},
          {"vocab_size", 96},
          {"hidden_size", 32},
          {"intermediate_size", 48},
          {"num_hidden_layers", 3},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 8},
          {"max_position_embeddings", 128},
          {"sliding_window", 5},
          {"query_pre_attn_scalar", 12},
          {"attn_logit_softcapping", 4.0},
          {"final_logit_softcapping", 20.0}};
}

nlohmann::json tiny_gemma3_config() {
  return {{"architectures", {"Gemma3ForCausalLM"}},
          {"model_type", "gemma3_text"},
          {"vocab_size", 96},
          {"hidden_size", 32},
          {"intermediate_size", 48},
          {"num_hidden_layers", 3},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 8},
          {"max_position_embeddings", 128},
          {"sliding_window", 5},
          {"layer_types", {"sliding_attention", "full_attention", "sliding_attention"}},
          {"query_pre_attn_scalar", 8},
          {"rope_parameters",
           {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1000000.0}}},
            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}}},
          {"tie_word_embeddings", false}};
}

nlohmann::json tiny_phi3_config() {
  return {{"architectures", {"Phi3ForCausalLM"}},
          {"model_type", "phi3"},
          {"vocab_size", 96},
          {"hidden_size", 32},
          {"intermediate_size", 48},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"max_position_embeddings", 128},
          {"original_max_position_embeddings", 64},
          {"sliding_window", 5},
          {"partial_rotary_factor", 0.5},
          {"rope_parameters", {{"rope_type", "longrope"}, {"short_factor", {1.0, 1.5}}, {"long_factor", {2.0, 4.0}}}}};
}

nlohmann::json tiny_bloom_config() {
  return {{"architectures", {"BloomForCausalLM"}},
          {"model_type", "bloom"},
          {"vocab_size", 96},
          {"hidden_size", 24},
          {"n_layer", 2},
          {"n_head", 6},
          {"layer_norm_epsilon", 1e-5}};
}

nlohmann::json tiny_opt_config() {
  return {{"architectures", {"OPTForCausalLM"}},
          {"model_type", "opt"},
          {"vocab_size", 96},
          {"hidden_size", 32},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"ffn_dim", 48},
          {"max_position_embeddings", 64}};
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return std::numeric_limits<double>::infinity();
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = std::fabs(static_cast<double>(x[i]) - static_cast<double>(y[i]));
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    m = std::max(m, d);
  }
  return m;
}

double max_abs(const Tensor& x) {
  double m = 0;
  for (float v : x.to_vector<float>()) m = std::max(m, std::fabs(static_cast<double>(v)));
  return m;
}

}  // namespace ferry::test
