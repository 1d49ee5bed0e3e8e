// Gemma 2 (Gemma Team, 2024, arXiv 2408.00118) and Gemma 3 (Gemma Team, 2025, arXiv 2503.19786), text only:
// Gemma2ForCausalLM and Gemma3ForCausalLM, after transformers' models/gemma2/modeling_gemma2.py and
// models/gemma3/modeling_gemma3.py (configuration_gemma2.py, configuration_gemma3.py: Gemma2Config,
// Gemma3TextConfig). One implementation serves both, as llama.h serves Llama/Mistral/Qwen: the two differ only in
// configuration — Gemma 2 soft-caps attention scores, Gemma 3 normalises each query and key head and gives its
// sliding and global layers separate RoPE tables — so one file keeps the shared (1 + w) norm, scaled embedding,
// four-norm block and soft-capping in one place instead of two copies.
//
// Legend: T = tokens, C = hidden_size, I = intermediate_size, Hq = num_attention_heads, Hkv = num_key_value_heads,
// D = head_dim (explicit: 256 in the released models, not C / Hq), V = vocab_size; P = Gemma2 or Gemma3.
//
// Module tree and parameter names are transformers' (and so the checkpoint keys):
//   model.embed_tokens (PTextScaledWordEmbedding; non-persistent buffer embed_scale)
//   model.layers.N.{self_attn.{q,k,v,o}_proj [+ Gemma 3: self_attn.{q,k}_norm], mlp.{gate,up,down}_proj,
//   input_layernorm, post_attention_layernorm, pre_feedforward_layernorm, post_feedforward_layernorm}
//   model.norm  model.rotary_emb  lm_head (tied to embed_tokens by default)
// Class names: P{Model | DecoderLayer | Attention | MLP | RMSNorm | RotaryEmbedding}, Gemma3TextModel for Gemma 3's
// base model. _no_split_modules: PDecoderLayer.
//
// Forward: h = embed_tokens(ids) · √C (the normaliser rounded to the weights' dtype, as transformers casts it);
// per layer h += post_attention_layernorm(self_attn(input_layernorm(h))), then
// h += post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h))); mlp = down(act(gate(x)) · up(x)) with
// hidden_activation (gelu_pytorch_tanh); every norm is x / √(mean(x²) + eps) · (1 + w) in f32. Attention: scores
// scaled by query_pre_attn_scalar^-½; Gemma 2 soft-caps them (attn_logit_softcapping: s ↦ cap · tanh(s / cap));
// Gemma 3 applies q_norm / k_norm per head before RoPE. layer_types picks each layer's kind: "sliding_attention"
// sees the last sliding_window keys, "full_attention" all (Gemma 2 default: every other layer sliding from layer 0;
// Gemma 3: every sliding_window_pattern-th layer global). Gemma 3's sliding layers rotate with rope_local_base_freq
// (rope_parameters.sliding_attention), its global ones with rope_theta plus rope_scaling (e.g. linear, factor 8).
// The logits are soft-capped by final_logit_softcapping when set (Gemma 2: 30).
// Also here: Gemma3ForConditionalGeneration's language model (text only; see that class), and GGUF files of
// llama.cpp's gemma2 / gemma3 architectures (gguf_model.cc: their norm weights are stored as 1 + w).
//
// Where ferry differs from transformers, and why:
//  - Activations are f32 whatever the weights' dtype (see llama.cc); the norms' (1 + w) and the embedding
//    normaliser are exactly transformers' (the normaliser rounded to bf16/f16 weights: √3072 = 55.4256 → 55.5).
//  - rotary_emb returns inv_freq (Gemma 2) or a Dict of them by layer type (Gemma 3), not (cos, sin).
//  - Gemma 3's attn_logit_softcapping is read but not applied, as in transformers 5.24 (Gemma3Attention does not pass
//    it to the attention function); ferry logs a warning when a config sets it.
//  - use_bidirectional_attention (EmbeddingGemma-style encoders) is not supported: an error, not a silent causal run.
//  - Batches are flattened, not padded (see llama.cc); dropouts are identities (inference).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/core/dtype.h"
#include "ferry/models/causal_lm.h"
#include "ferry/models/config.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/embedding.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/norm.h"
#include "ferry/nn/rotary.h"

namespace ferry::models {

/// Gemma2Config / Gemma3TextConfig: config.json keys with transformers' defaults, validated once.
struct GemmaConfig {
  std::string architecture = "Gemma2ForCausalLM";  // or "Gemma3ForCausalLM"
  std::string class_prefix = "Gemma2";             // "Gemma2" or "Gemma3": the modules' class names
  std::string model_type = "gemma2";               // or "gemma3_text"
  std::string base_model_class = "Gemma2Model";    // Gemma 3: "Gemma3TextModel"
  // Sizes default to transformers' class defaults (gemma-2-2b's shape), as released Gemma 3 configs rely on them.
  int64_t vocab_size = 256000;  // Gemma 3: 262208
  int64_t hidden_size = 2304;
  int64_t intermediate_size = 9216;
  int64_t num_hidden_layers = 26;
  int64_t num_attention_heads = 8;
  int64_t num_key_value_heads = 4;  // not num_attention_heads
  int64_t head_dim = 256;
  int64_t max_position_embeddings = 8192;  // Gemma 3: 131072
  std::string hidden_activation = "gelu_pytorch_tanh";
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = true;
  bool attention_bias = false;         // a bias on q/k/v/o_proj
  double query_pre_attn_scalar = 256;  // scores are scaled by query_pre_attn_scalar^-½
  double attn_logit_softcapping = 0;   // Gemma 2: 50; 0 = none (null). Gemma 3: never applied (see the top)
  double final_logit_softcapping = 0;  // Gemma 2: 30; 0 = none (null)
  bool qk_norm = false;                // Gemma 3: q_norm and k_norm over head_dim, before RoPE
  /// Per layer: true for "sliding_attention" (layer_types, or the generation's default pattern).
  std::vector<bool> sliding_layers;
  int64_t sliding_window = 4096;  // the sliding layers' window; 0 = none (null)
  /// RoPE of the global ("full_attention") and the sliding layers. Gemma 2: one table, both equal. Gemma 3:
  /// rope_parameters.{full_attention, sliding_attention}, or legacy rope_theta (1e6) + rope_scaling and
  /// rope_local_base_freq (1e4).
  nn::RopeParameters rope_global, rope_local;
  bool rope_per_layer_type = false;  // Gemma 3: rotary_emb holds one table per layer type present
  /// The norms' weights are stored as 1 + w (llama.cpp's converter adds the 1): a ferry extension key that
  /// gguf_config sets, so GGUF norm weights stay views of the file.
  bool norm_weights_include_one = false;

  /// Gemma2Config (model_type "gemma2").
  static GemmaConfig gemma2_from_json(const ConfigJson& json);
  /// Gemma3TextConfig (model_type "gemma3_text").
  static GemmaConfig gemma3_from_json(const ConfigJson& json);
};

/// Gemma2RMSNorm / Gemma3RMSNorm: x / √(mean(x²) + eps) · (1 + weight), in f32. The weight is stored as the
/// offset from 1 (checkpoints hold w, not 1 + w), unless weight_includes_one (GGUF files: 1 + w stored).
/// Forward: args[0] = x [..., D].
class GemmaRMSNorm : public nn::RMSNorm {
 public:
  GemmaRMSNorm(std::string class_prefix, int64_t dim, double eps, DType dtype, bool weight_includes_one = false);
  std::string type_name() const override { return prefix_ + "RMSNorm"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

 private:
  std::string prefix_;
  bool weight_includes_one_;
  Tensor ones_;  // [D] f32 of 1, on the device the weight last lived on
};

/// Gemma2TextScaledWordEmbedding / Gemma3TextScaledWordEmbedding: an Embedding whose rows are multiplied by
/// embed_scale = √C rounded to the weights' dtype (transformers: self.embed_scale.to(self.weight.dtype)); the value
/// is also the non-persistent scalar buffer embed_scale, as transformers registers it.
class GemmaScaledWordEmbedding : public nn::Embedding {
 public:
  GemmaScaledWordEmbedding(std::string class_prefix, int64_t num_embeddings, int64_t embedding_dim, DType dtype);
  std::string type_name() const override { return prefix_ + "TextScaledWordEmbedding"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  float embed_scale() const noexcept { return scale_; }

 private:
  std::string prefix_;
  float scale_;
};

/// Gemma3RotaryEmbedding: for each layer type present (sorted: "full_attention", "sliding_attention"), the
/// non-persistent f32 buffers <type>_inv_freq and <type>_original_inv_freq [D/2], as transformers registers them.
/// Forward: no arguments -> Dict{layer type: inv_freq}.
class Gemma3RotaryEmbedding : public nn::Module {
 public:
  explicit Gemma3RotaryEmbedding(const GemmaConfig& config);
  std::string type_name() const override { return "Gemma3RotaryEmbedding"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

 private:
  std::vector<std::string> layer_types_;
};

/// down_proj(act(gate_proj(x)) · up_proj(x)), act = hidden_activation. x: [T, C] -> [T, C].
class GemmaMLP : public nn::Module {
 public:
  GemmaMLP(const GemmaConfig& config, DType dtype);
  std::string type_name() const override { return prefix_ + "MLP"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> gate_proj, up_proj, down_proj;

 private:
  std::string prefix_, activation_;
};

/// Grouped-query attention with RoPE, query_pre_attn_scalar scaling, Gemma 2's score soft-capping, Gemma 3's
/// per-head q/k norms and the layer's sliding window. x: [T, C] -> [T, C]. Named arguments: position_ids i64 [T],
/// position_embeddings (this layer's inv_freq), past_key_values.
class GemmaAttention : public nn::Module {
 public:
  GemmaAttention(const GemmaConfig& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return prefix_ + "Attention"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> q_proj, k_proj, v_proj, o_proj;
  std::shared_ptr<GemmaRMSNorm> q_norm, k_norm;  // Gemma 3; null for Gemma 2

 private:
  std::string prefix_;
  int64_t layer_idx_, num_heads_, num_key_value_heads_, head_dim_, sliding_window_;
  float scaling_, softcap_;
};

/// The sandwich block: h = x + post_attention_layernorm(self_attn(input_layernorm(x)));
/// out = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h))).
class GemmaDecoderLayer : public nn::Module {
 public:
  GemmaDecoderLayer(const GemmaConfig& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return prefix_ + "DecoderLayer"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<GemmaAttention> self_attn;
  std::shared_ptr<GemmaMLP> mlp;
  std::shared_ptr<GemmaRMSNorm> input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
      post_feedforward_layernorm;

 private:
  std::string prefix_;
};

/// Gemma2Model / Gemma3TextModel. Forward: input_ids (+ past_key_values, position_ids) -> Dict{last_hidden_state
/// f32 [T, C], past_key_values}.
class GemmaModel : public nn::Module {
 public:
  GemmaModel(const GemmaConfig& config, DType dtype);
  std::string type_name() const override { return class_name_; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<GemmaScaledWordEmbedding> embed_tokens;
  std::shared_ptr<nn::ModuleList> layers;
  std::shared_ptr<GemmaRMSNorm> norm;
  std::shared_ptr<nn::Module> rotary_emb;  // nn::RotaryEmbedding (Gemma 2) or Gemma3RotaryEmbedding

 private:
  std::string class_name_;
  std::vector<bool> sliding_layers_;
};

/// GemmaModel + lm_head, then final_logit_softcapping. Forward: causal_lm.h's contract.
class GemmaForCausalLM : public CausalLM {
 public:
  GemmaForCausalLM(const GemmaConfig& config, DType dtype);
  std::string type_name() const override { return config_.architecture; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  const GemmaConfig& config() const noexcept { return config_; }

  std::shared_ptr<GemmaModel> model;
  std::shared_ptr<nn::Linear> lm_head;

 private:
  GemmaConfig config_;
};

/// Gemma3ForConditionalGeneration (model_type "gemma3": Gemma 3 4B and larger), text only. Its checkpoints — the
/// Hub's and what transformers 5.24's save_pretrained writes alike — hold the language model under
/// language_model.model.* (and language_model.lm_head.weight when untied), the vision tower under vision_tower.* and
/// the projector under multi_modal_projector.*. ferry builds the language model alone, from config.json's
/// text_config, as the child language_model (a Gemma3ForCausalLM, so its keys are the checkpoint's); the vision
/// tower and projector are not built: the loaders report their tensors as unused, and building the model logs a
/// note that says why. Images are not supported. tie_word_embeddings: the top-level key (Gemma3Config's, default
/// true), as transformers ties; text_config's is ignored. Forward: causal_lm.h's contract, through language_model.
class Gemma3ForConditionalGeneration : public CausalLM {
 public:
  Gemma3ForConditionalGeneration(const GemmaConfig& text_config, DType dtype);
  std::string type_name() const override { return "Gemma3ForConditionalGeneration"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<GemmaForCausalLM> language_model;
};

/// Factory entries for the architecture registry.
std::shared_ptr<CausalLM> make_gemma2(const ConfigJson& config, DType dtype);
std::shared_ptr<CausalLM> make_gemma3(const ConfigJson& config, DType dtype);
/// Gemma3ForConditionalGeneration's: reads text_config (required) and the top-level tie_word_embeddings.
std::shared_ptr<CausalLM> make_gemma3_conditional(const ConfigJson& config, DType dtype);

}  // namespace ferry::models
