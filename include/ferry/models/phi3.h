// Phi-3 (Abdin et al., 2024, arXiv 2404.14219; also Phi-3.5 and Phi-4): Phi3ForCausalLM, after transformers'
// models/phi3/modeling_phi3.py.
//
// Legend: T = tokens, C = hidden_size, I = intermediate_size, Hq = num_attention_heads, Hkv = num_key_value_heads,
// D = head_dim, R = rotary_ndims = int(D · partial_rotary_factor) (≤ D, even), V = vocab_size.
//
// Module tree and parameter names are transformers' (and so the checkpoint keys):
//   model.embed_tokens  model.layers.N.{self_attn.{o_proj, qkv_proj}, mlp.{gate_up_proj, down_proj},
//   input_layernorm, post_attention_layernorm, resid_attn_dropout, resid_mlp_dropout}  model.norm  model.rotary_emb
//   lm_head (no biases anywhere; lm_head tied to embed_tokens when tie_word_embeddings)
// A Llama block but for two fused projections: qkv_proj's output rows are q | k | v (Hq·D, then Hkv·D twice), and
// gate_up_proj's are gate | up (I each; act(gate) · up). RoPE rotates the first R dims of each head (rotate-half
// pairs (i, i + R/2)); sliding_window, when set, limits every layer to the last sliding_window keys.
// LongRoPE ("longrope", or "su"/"yarn" in older configs): inv_freq = 1 / (ext_i · θ^(2i/R)), with ext = short_factor
// while the longest sequence of the forward is within original_max_position_embeddings and long_factor beyond it,
// and cos/sin scaled by the attention factor (transformers' attention_scaling).
//
// Where ferry differs from transformers, and why:
//  - Activations are f32 whatever the weights' dtype (see llama.cc).
//  - rotary_emb returns inv_freq, not (cos, sin); like transformers it picks the short or long factors by
//    max(position_ids) + 1 over the forward (over a whole KvCacheBatch, as over transformers' padded batch). Keys
//    already in the cache keep the rotation they were stored with, as in transformers' forward; transformers'
//    generate() instead drops the cache and recomputes the whole sequence at the step that first goes past
//    original_max_position_embeddings, so a generation that crosses that length continues differently from there
//    (one that starts beyond it, or stays within it, does not).
//  - head_dim (not a Phi3Config key, but read by its modules when present) is honoured; R must be even and ≥ 2.
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
#include "ferry/nn/dropout.h"
#include "ferry/nn/embedding.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/norm.h"

namespace ferry::models {

/// Phi3Config: config.json keys with transformers' defaults, RoPE as Phi3Config.convert_rope_params_to_dict reads
/// it (rope_scaling when not empty, else rope_parameters; rope_theta and partial_rotary_factor default to the
/// top-level keys, then 10000 and 1.0).
struct Phi3Config {
  int64_t vocab_size = 0;           // required
  int64_t hidden_size = 0;          // required
  int64_t intermediate_size = 0;    // required
  int64_t num_hidden_layers = 0;    // required
  int64_t num_attention_heads = 0;  // required
  int64_t num_key_value_heads = 0;  // default num_attention_heads
  int64_t head_dim = 0;             // default hidden_size / num_attention_heads
  int64_t max_position_embeddings = 4096;
  std::string hidden_act = "silu";
  double rms_norm_eps = 1e-5;
  double resid_pdrop = 0.0;
  bool tie_word_embeddings = false;
  int64_t sliding_window = 0;  // 0: full causal attention (null or absent)

  // RoPE
  std::string rope_type = "default";  // "default" or "longrope" ("su" and "yarn" read as "longrope")
  double rope_theta = 10000.0;
  double partial_rotary_factor = 1.0;
  int64_t rotary_ndims = 0;  // R = int(D · partial_rotary_factor)
  /// longrope: the length beyond which long_factor applies. The top-level key (default 4096) for "longrope"; the
  /// rope dict's own key for "su" / "yarn" (transformers standardises those before renaming them).
  int64_t original_max_position_embeddings = 4096;
  std::vector<double> short_factor, long_factor;  // longrope: R/2 each
  double attention_scaling = 1.0;                 // longrope: attention_factor, else √(1 + ln f / ln original), f > 1

  static Phi3Config from_json(const ConfigJson& json);
};

/// inv_freq [R/2] f32 for `factors` (longrope: short or long; empty: plain RoPE), in transformers' f32 arithmetic.
Tensor phi3_inverse_frequencies(const Phi3Config& config, const std::vector<double>& factors);

/// Phi3RotaryEmbedding: non-persistent f32 buffers inv_freq and original_inv_freq [R/2] (the short factors), as
/// transformers registers them. Forward: kwarg position_ids i64 [T] -> inv_freq, or the long factors' frequencies
/// when longrope and max(position_ids) + 1 > original_max_position_embeddings.
class Phi3RotaryEmbedding : public nn::Module {
 public:
  explicit Phi3RotaryEmbedding(const Phi3Config& config);
  std::string type_name() const override { return "Phi3RotaryEmbedding"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

 private:
  bool longrope_;
  int64_t original_max_position_embeddings_;
  Tensor long_inv_freq_;  // a plain member, as transformers' long_inv_freq attribute; given on inv_freq's device
};

/// Attention with a fused q | k | v projection, grouped KV heads, partial RoPE and an optional sliding window.
/// x: [T, C] -> [T, C]. Named arguments: position_ids i64 [T], position_embeddings (inv_freq [R/2]),
/// past_key_values.
class Phi3Attention : public nn::Module {
 public:
  Phi3Attention(const Phi3Config& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return "Phi3Attention"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> o_proj, qkv_proj;

 private:
  int64_t layer_idx_, num_heads_, num_key_value_heads_, head_dim_, sliding_window_;
  float scaling_, rope_scaling_;
};

/// down_proj(act(gate) · up), gate | up = gate_up_proj(x). x: [T, C] -> [T, C].
class Phi3MLP : public nn::Module {
 public:
  Phi3MLP(const Phi3Config& config, DType dtype);
  std::string type_name() const override { return "Phi3MLP"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> gate_up_proj, down_proj;

 private:
  int64_t intermediate_size_;
  std::string activation_;
};

/// Phi3RMSNorm (T5-style RMSNorm under Phi-3's class name).
class Phi3RMSNorm : public nn::RMSNorm {
 public:
  Phi3RMSNorm(int64_t hidden_size, double eps, DType dtype) : nn::RMSNorm(hidden_size, eps, dtype) {}
  std::string type_name() const override { return "Phi3RMSNorm"; }
};

/// Pre-norm block: h = x + self_attn(input_layernorm(x)); out = h + mlp(post_attention_layernorm(h)).
class Phi3DecoderLayer : public nn::Module {
 public:
  Phi3DecoderLayer(const Phi3Config& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return "Phi3DecoderLayer"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<Phi3Attention> self_attn;
  std::shared_ptr<Phi3MLP> mlp;
  std::shared_ptr<Phi3RMSNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<nn::Dropout> resid_attn_dropout, resid_mlp_dropout;
};

/// The decoder stack. Forward: input_ids (+ past_key_values, position_ids) -> Dict{last_hidden_state f32 [T, C],
/// past_key_values}.
class Phi3Model : public nn::Module {
 public:
  Phi3Model(const Phi3Config& config, DType dtype);
  std::string type_name() const override { return "Phi3Model"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Embedding> embed_tokens;
  std::shared_ptr<nn::ModuleList> layers;
  std::shared_ptr<Phi3RMSNorm> norm;
  std::shared_ptr<Phi3RotaryEmbedding> rotary_emb;
};

/// Phi3Model + lm_head. Forward: causal_lm.h's contract.
class Phi3ForCausalLM : public CausalLM {
 public:
  Phi3ForCausalLM(const Phi3Config& config, DType dtype);
  std::string type_name() const override { return "Phi3ForCausalLM"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  const Phi3Config& config() const noexcept { return config_; }

  std::shared_ptr<Phi3Model> model;
  std::shared_ptr<nn::Linear> lm_head;

 private:
  Phi3Config config_;
};

/// Factory entry for the architecture registry.
std::shared_ptr<CausalLM> make_phi3(const ConfigJson& config, DType dtype);

}  // namespace ferry::models
