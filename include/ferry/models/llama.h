// The Llama family: LlamaForCausalLM, and the two architectures that differ from it only in configuration —
// MistralForCausalLM (sliding-window attention) and Qwen2ForCausalLM (q/k/v biases, sliding window on upper layers).
// transformers: models/llama/modeling_llama.py, models/mistral/modeling_mistral.py, models/qwen2/modeling_qwen2.py.
//
// Legend: T = tokens, C = hidden_size, I = intermediate_size, Hq = num_attention_heads, Hkv = num_key_value_heads,
// D = head_dim, V = vocab_size.
//
// Module tree and parameter names are transformers' (and so the checkpoint keys):
//   model.embed_tokens  model.layers.N.{self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj, input_layernorm,
//   post_attention_layernorm}  model.norm  model.rotary_emb  lm_head
// Class names carry the family prefix (MistralDecoderLayer, Qwen2RMSNorm, ...), as no_split_module_classes expect.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ferry/core/dtype.h"
#include "ferry/models/causal_lm.h"
#include "ferry/models/config.h"
#include "ferry/models/moe.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/embedding.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/norm.h"
#include "ferry/nn/rotary.h"
#include "ferry/ops/rotary.h"

namespace ferry::models {

struct LlamaConfig;

/// What tells the members of the Llama family apart: their class names, defaults and own config keys. Each registry
/// entry (architectures.cc) passes its variant to make_llama_family; the modules never compare class names.
struct LlamaVariant {
  const char* architecture;     // "MistralForCausalLM"
  const char* class_prefix;     // "Mistral": the modules' class names (MistralDecoderLayer, ...)
  const char* model_type;       // "mistral"
  int64_t max_position_embeddings;  // when the key is absent
  int64_t num_key_value_heads;      // when the key is absent (0: num_attention_heads)
  /// Reads the variant's own keys into `c` (biases, sliding windows), after the shared ones.
  void (*read_own_keys)(const ConfigJson& json, LlamaConfig& c);
};
/// Llama: attention_bias, mlp_bias, full attention. Mistral: sliding_window on every layer (4096 when absent).
/// Qwen2: q/k/v with bias; sliding windows per use_sliding_window, layer_types or max_window_layers.
/// Qwen3: Qwen2's sliding windows, attention_bias on all four projections, RMSNorm of each head's queries and keys
/// before RoPE (q_norm, k_norm), head_dim 128 when absent.
/// Mixtral: Mistral's attention (sliding_window off when absent) and a sparse mixture of experts under
/// "block_sparse_moe" in every layer. Qwen2-MoE: Qwen2's attention (qkv_bias) and a sparse block with a shared
/// expert in the layers decoder_sparse_step / mlp_only_layers pick. Qwen3-MoE: Qwen3's attention (head_dim
/// hidden / heads when absent) and a sparse block without shared expert (moe.h).
extern const LlamaVariant kLlamaVariant, kMistralVariant, kQwen2Variant, kQwen3Variant;
extern const LlamaVariant kMixtralVariant, kQwen2MoeVariant, kQwen3MoeVariant;

/// LlamaConfig / MistralConfig / Qwen2Config / Qwen3Config: config.json keys, transformers' defaults, validated once.
struct LlamaConfig {
  std::string architecture = "LlamaForCausalLM";
  std::string class_prefix = "Llama";  // "Llama", "Mistral", "Qwen2" or "Qwen3"
  std::string model_type = "llama";
  int64_t vocab_size = 0;          // required
  int64_t hidden_size = 0;         // required
  int64_t intermediate_size = 0;   // required
  int64_t num_hidden_layers = 0;   // required
  int64_t num_attention_heads = 0; // required
  int64_t num_key_value_heads = 0; // default num_attention_heads
  int64_t head_dim = 0;            // default hidden_size / num_attention_heads
  int64_t max_position_embeddings = 2048;
  std::string hidden_act = "silu";
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;   // Llama: attention_bias; Qwen2: always; Mistral: never
  bool o_proj_bias = false;  // Llama: attention_bias
  bool mlp_bias = false;     // Llama: mlp_bias
  bool qk_norm = false;      // Qwen3: RMSNorm over head_dim of each query and key head, before RoPE
  nn::RopeParameters rope;
  /// How q/k pair up for RoPE: HF's rotate-half (default), or adjacent pairs when the weights keep llama.cpp's q/k
  /// row order (config key "rope_interleaved": true, a ferry extension that gguf_config sets for llama GGUF files,
  /// so their q/k weights stay zero-copy views of the file).
  ops::RopeLayout rope_layout = ops::RopeLayout::RotateHalf;
  /// Per layer: 0 = full causal attention, W > 0 = only the last W keys (Mistral's sliding_window; Qwen2's
  /// layer_types / use_sliding_window + max_window_layers).
  std::vector<int64_t> sliding_window;
  /// Builds layer `layer_idx`'s feed-forward part, registered under `feed_forward_name`; unset: a LlamaMLP under
  /// "mlp". A variant's read_own_keys sets it for a mixture of experts (Mixtral's "block_sparse_moe"). The module
  /// takes the normed hidden states [T, C] and returns [T, C].
  std::function<std::shared_ptr<nn::Module>(int64_t layer_idx, DType dtype)> feed_forward;
  std::string feed_forward_name = "mlp";
  /// Mixtures of experts: the sparse blocks' shape (num_experts 0: a dense model) and which layers have one.
  MoeConfig moe;
  std::vector<bool> sparse_layers;

  /// Reads a config of the family member `variant`.
  static LlamaConfig from_json(const ConfigJson& json, const LlamaVariant& variant);
};

/// The family's RMSNorm under its HF class name (LlamaRMSNorm, MistralRMSNorm, Qwen2RMSNorm).
class LlamaRMSNorm : public nn::RMSNorm {
 public:
  LlamaRMSNorm(std::string class_name, int64_t hidden_size, double eps, DType dtype)
      : nn::RMSNorm(hidden_size, eps, dtype), class_name_(std::move(class_name)) {}
  std::string type_name() const override { return class_name_; }

 private:
  std::string class_name_;
};

/// SwiGLU feed-forward: down_proj(silu(gate_proj(x)) · up_proj(x)). x: [T, C] -> [T, C].
class LlamaMLP : public nn::Module {
 public:
  LlamaMLP(const LlamaConfig& config, DType dtype);
  std::string type_name() const override { return prefix_ + "MLP"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> gate_proj, up_proj, down_proj;

 private:
  std::string prefix_;
};

/// Multi-head attention with grouped KV heads and RoPE. x: [T, C] -> [T, C].
/// Named arguments: position_ids i64 [T], position_embeddings (inv_freq from rotary_emb), past_key_values.
class LlamaAttention : public nn::Module {
 public:
  LlamaAttention(const LlamaConfig& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return prefix_ + "Attention"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> q_proj, k_proj, v_proj, o_proj;
  std::shared_ptr<nn::RMSNorm> q_norm, k_norm;  // LlamaConfig::qk_norm (Qwen3); null otherwise

 private:
  std::string prefix_;
  int64_t layer_idx_, num_heads_, num_key_value_heads_, head_dim_, sliding_window_;
  float scaling_;
  ops::RopeLayout rope_layout_;
};

/// Pre-norm block: h = x + self_attn(input_layernorm(x)); out = h + mlp(post_attention_layernorm(h)), where mlp is
/// any feed-forward module (LlamaConfig::feed_forward: a dense MLP, or a mixture of experts).
class LlamaDecoderLayer : public nn::Module {
 public:
  LlamaDecoderLayer(const LlamaConfig& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return prefix_ + "DecoderLayer"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<nn::Module> mlp;  // registered under LlamaConfig::feed_forward_name
  std::shared_ptr<LlamaRMSNorm> input_layernorm, post_attention_layernorm;

 private:
  std::string prefix_;
};

/// The decoder stack. Forward: input_ids (+ past_key_values, position_ids) -> final hidden states f32 [T, C].
class LlamaModel : public nn::Module {
 public:
  LlamaModel(const LlamaConfig& config, DType dtype);
  std::string type_name() const override { return prefix_ + "Model"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Embedding> embed_tokens;
  std::shared_ptr<nn::ModuleList> layers;
  std::shared_ptr<LlamaRMSNorm> norm;
  std::shared_ptr<nn::RotaryEmbedding> rotary_emb;

 private:
  std::string prefix_;
};

/// LlamaModel + lm_head (tied to embed_tokens when tie_word_embeddings). Forward: causal_lm.h's contract.
class LlamaForCausalLM : public CausalLM {
 public:
  LlamaForCausalLM(const LlamaConfig& config, DType dtype);
  std::string type_name() const override { return config_.architecture; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  const LlamaConfig& config() const noexcept { return config_; }

  std::shared_ptr<LlamaModel> model;
  std::shared_ptr<nn::Linear> lm_head;

 private:
  LlamaConfig config_;
};

/// The registry's builder: reads the config and builds the model (parameters on meta inside init_empty_weights).
std::shared_ptr<CausalLM> make_llama_family(const ConfigJson& config, const LlamaVariant& variant, DType dtype);

}  // namespace ferry::models
