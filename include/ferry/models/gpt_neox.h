// GPT-NeoX (Black et al., 2022, EleutherAI's GPT-NeoX-20B; also the Pythia suite): GPTNeoXForCausalLM, after
// transformers' models/gpt_neox/modeling_gpt_neox.py.
//
// Legend: T = tokens, C = hidden_size, H = num_attention_heads, D = C / H, R = rotary_ndims = int(D ·
// partial_rotary_factor) (≤ D, even), I = intermediate_size, V = vocab_size.
//
// Module tree and parameter names are the checkpoints' (transformers' classes and attributes, but for the head):
//   gpt_neox.embed_in  gpt_neox.emb_dropout
//   gpt_neox.layers.N.{input_layernorm, post_attention_layernorm, post_attention_dropout, post_mlp_dropout,
//                      attention.{query_key_value, dense}, mlp.{dense_h_to_4h, dense_4h_to_h}}
//   gpt_neox.final_layer_norm  gpt_neox.rotary_emb  embed_out (no bias, untied by default)
// The head is embed_out, as in every GPT-NeoX checkpoint (transformers 5 calls the attribute lm_head and renames the
// key on load and back on save; see gpt_neox.cc).
// query_key_value's output rows are per head: [H, 3, D] (each head's q, then k, then v), not q | k | v.
// The block is parallel by default (use_parallel_residual): x + attn(ln_1(x)) + mlp(ln_2(x)); sequential otherwise:
// h = x + attn(ln_1(x)); h + mlp(ln_2(h)).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ferry/core/dtype.h"
#include "ferry/models/causal_lm.h"
#include "ferry/models/config.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/dropout.h"
#include "ferry/nn/embedding.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/norm.h"
#include "ferry/nn/rotary.h"

namespace ferry::models {

/// GPTNeoXConfig: config.json keys. RoPE as transformers 5 reads it: rope_scaling, else rope_parameters, with
/// rope_theta defaulting to rotary_emb_base (10000) and partial_rotary_factor to rotary_pct (0.25); the top-level
/// rope_theta and partial_rotary_factor keys are not read (transformers ignores them for this family too).
struct GPTNeoXConfig {
  int64_t vocab_size = 0;           // required
  int64_t hidden_size = 0;          // required
  int64_t num_hidden_layers = 0;    // required
  int64_t num_attention_heads = 0;  // required
  int64_t intermediate_size = 0;    // required
  int64_t max_position_embeddings = 2048;
  std::string hidden_act = "gelu";
  double layer_norm_eps = 1e-5;
  double hidden_dropout = 0.0, attention_dropout = 0.0;
  bool use_parallel_residual = true;
  bool attention_bias = true;  // query_key_value and dense
  bool tie_word_embeddings = false;
  nn::RopeParameters rope;  // default: theta 10000
  double partial_rotary_factor = 0.25;
  int64_t rotary_ndims = 0;  // int(D · partial_rotary_factor)
  /// query_key_value's output rows as three blocks q | k | v instead of per head (q_h, k_h, v_h): the order
  /// llama.cpp's converter writes (config key "fused_qkv_blocks", a ferry extension gguf_config sets for gptneox
  /// files, so the weights stay as the file holds them).
  bool fused_qkv_blocks = false;

  int64_t head_size() const noexcept { return hidden_size / num_attention_heads; }

  static GPTNeoXConfig from_json(const ConfigJson& json);
};

/// Attention with a fused per-head q|k|v projection and RoPE (rotate-half pairs (i, i + R/2)) on the first R dims of
/// each head. x: [T, C] -> [T, C]. Named arguments: position_ids i64 [T], position_embeddings (inv_freq [R/2]),
/// past_key_values.
class GPTNeoXAttention : public nn::Module {
 public:
  GPTNeoXAttention(const GPTNeoXConfig& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return "GPTNeoXAttention"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> query_key_value, dense;

 private:
  int64_t layer_idx_, num_heads_, head_size_;
  float scaling_;
  bool fused_qkv_blocks_;
};

/// dense_4h_to_h(act(dense_h_to_4h(x))), both with bias. x: [T, C] -> [T, C].
class GPTNeoXMLP : public nn::Module {
 public:
  GPTNeoXMLP(const GPTNeoXConfig& config, DType dtype);
  std::string type_name() const override { return "GPTNeoXMLP"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> dense_h_to_4h, dense_4h_to_h;

 private:
  std::string activation_;
};

/// One layer, parallel or sequential residual (see the file comment). x: [T, C] -> [T, C].
class GPTNeoXLayer : public nn::Module {
 public:
  GPTNeoXLayer(const GPTNeoXConfig& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return "GPTNeoXLayer"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::LayerNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<nn::Dropout> post_attention_dropout, post_mlp_dropout;
  std::shared_ptr<GPTNeoXAttention> attention;
  std::shared_ptr<GPTNeoXMLP> mlp;

 private:
  bool use_parallel_residual_;
};

/// Embeddings, layers, final_layer_norm. Forward: input_ids (+ past_key_values, position_ids) ->
/// Dict{last_hidden_state f32 [T, C], past_key_values}.
class GPTNeoXModel : public nn::Module {
 public:
  GPTNeoXModel(const GPTNeoXConfig& config, DType dtype);
  std::string type_name() const override { return "GPTNeoXModel"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Embedding> embed_in;
  std::shared_ptr<nn::Dropout> emb_dropout;
  std::shared_ptr<nn::ModuleList> layers;
  std::shared_ptr<nn::LayerNorm> final_layer_norm;
  std::shared_ptr<nn::RotaryEmbedding> rotary_emb;
};

/// GPTNeoXModel + embed_out (no bias; tied to embed_in when tie_word_embeddings). Forward: causal_lm.h's contract.
class GPTNeoXForCausalLM : public CausalLM {
 public:
  GPTNeoXForCausalLM(const GPTNeoXConfig& config, DType dtype);
  std::string type_name() const override { return "GPTNeoXForCausalLM"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  const GPTNeoXConfig& config() const noexcept { return config_; }

  std::shared_ptr<GPTNeoXModel> gpt_neox;
  std::shared_ptr<nn::Linear> embed_out;

 private:
  GPTNeoXConfig config_;
};

/// Factory entry for the architecture registry.
std::shared_ptr<CausalLM> make_gpt_neox(const ConfigJson& config, DType dtype);

}  // namespace ferry::models
