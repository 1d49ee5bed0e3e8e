// BLOOM (BigScience Workshop, 2022, "BLOOM: A 176B-Parameter Open-Access Multilingual Language Model"; ALiBi from
// Press et al., 2021, "Train Short, Test Long"): BloomForCausalLM, after transformers' models/bloom/modeling_bloom.py
// (transformers 5.24). The model of Accelerate's big-model-inference guide (bigscience/bloom-560m ... bloom).
//
// Legend: T = new tokens, S = keys of the sequence (cached + new), C = hidden_size (n_embed), H = n_head,
// D = C / H, V = vocab_size.
//
// Module tree and parameter names are transformers' (the checkpoint keys):
//   transformer.word_embeddings  transformer.word_embeddings_layernorm
//   transformer.h.N.{input_layernorm, self_attention.{query_key_value, dense, attention_dropout},
//                    post_attention_layernorm, mlp.{dense_h_to_4h, dense_4h_to_h}}
//   transformer.ln_f  lm_head (no bias, tied to word_embeddings by default)
// Every Linear and LayerNorm has a bias; the MLP is 4C wide. Checkpoints saved from the bare BloomModel (every
// bigscience upload: "h.0.self_attention.query_key_value.weight", "word_embeddings.weight", no "transformer."
// prefix) load too: the loader adds the base_model_prefix, as transformers does.
// query_key_value's output rows are per head: [H, 3, D] (each head's q, then k, then v), not q | k | v.
// No positions are added to the tokens: each head h adds slope_h · s to the score of key s (its position in the
// sequence, 0 .. S-1), on top of (1/√D) q·k (transformers' alibi.baddbmm(q, kᵀ, beta=1, alpha=inv_norm_factor)).
// Block: r = apply_residual_connection_post_layernorm ? ln_1(x) : x; h = r + attn(ln_1(x));
//        r' = apply_residual_connection_post_layernorm ? ln_2(h) : h; out = r' + mlp(ln_2(h)).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"
#include "ferry/models/causal_lm.h"
#include "ferry/models/config.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/dropout.h"
#include "ferry/nn/embedding.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/norm.h"

namespace ferry::models {

/// BloomConfig: config.json keys. transformers' attribute_map lets num_hidden_layers stand for n_layer and
/// num_attention_heads for n_head (the attribute-map name wins when both are given), and n_embed for hidden_size
/// (n_embed wins), as BloomConfig reads them.
struct BloomConfig {
  int64_t vocab_size = 0;   // required
  int64_t hidden_size = 0;  // required (n_embed or hidden_size)
  int64_t n_layer = 0;      // required (n_layer or num_hidden_layers)
  int64_t n_head = 0;       // required (n_head or num_attention_heads)
  double layer_norm_epsilon = 1e-5;
  bool apply_residual_connection_post_layernorm = false;
  double hidden_dropout = 0.0, attention_dropout = 0.0;
  int64_t pretraining_tp = 1;  // read and checked, not used: see bloom.cc
  bool slow_but_exact = false;
  bool tie_word_embeddings = true;
  /// query_key_value's output rows as three blocks q | k | v instead of per head: the order llama.cpp's converter
  /// writes (config key "fused_qkv_blocks", a ferry extension gguf_config sets for bloom files, as for gptneox).
  bool fused_qkv_blocks = false;

  int64_t head_dim() const noexcept { return hidden_size / n_head; }

  static BloomConfig from_json(const ConfigJson& json);
};

/// The ALiBi slope of each of `num_heads` heads, f32 as transformers computes them: for the closest power of two
/// P ≤ H, slope_i = b^(i+1) with b = 2^(-2^-(log2 P - 3)) (i < P); the H - P remaining heads take every other power
/// of 2^(-2^-(log2 2P - 3)): exponents 1, 3, 5, .... HF: _get_alibi_slopes (modeling_bloom.py).
std::vector<float> alibi_slopes(int64_t num_heads);

/// The ALiBi bias of one sequence's attention: bias[h, t, s] = slopes[h] · s for T queries against S keys at
/// positions 0 .. S-1 (the same for every query: softmax is invariant to the per-row constant the paper subtracts).
/// f32 [H, T, S] on the cpu. HF: build_alibi_tensor for an all-ones attention mask (positions = cumsum - 1).
Tensor alibi_bias(const std::vector<float>& slopes, int64_t queries, int64_t keys);

/// Self-attention with a fused per-head q|k|v projection and the ALiBi bias. x: [T, C] -> [T, C]. Named
/// arguments: past_key_values (the keys' positions are their places in each sequence's cache).
class BloomAttention : public nn::Module {
 public:
  BloomAttention(const BloomConfig& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return "BloomAttention"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> query_key_value, dense;
  std::shared_ptr<nn::Dropout> attention_dropout;

 private:
  int64_t layer_idx_, num_heads_, head_dim_;
  float inv_norm_factor_;
  std::vector<float> slopes_;
  bool fused_qkv_blocks_;
};

/// dense_4h_to_h(bloom_gelu(dense_h_to_4h(x))), both with bias; bloom_gelu is the tanh approximation
/// x · 0.5 · (1 + tanh(0.79788456 · x · (1 + 0.044715 x²))). x: [T, C] -> [T, C]. HF: BloomMLP (without the residual,
/// which BloomBlock adds).
class BloomMLP : public nn::Module {
 public:
  BloomMLP(const BloomConfig& config, DType dtype);
  std::string type_name() const override { return "BloomMLP"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> dense_h_to_4h, dense_4h_to_h;
};

/// One layer (see the file comment for the residuals). x: [T, C] -> [T, C]. HF: BloomBlock, the no-split module.
class BloomBlock : public nn::Module {
 public:
  BloomBlock(const BloomConfig& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return "BloomBlock"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::LayerNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<BloomAttention> self_attention;
  std::shared_ptr<BloomMLP> mlp;

 private:
  bool residual_post_layernorm_;
};

/// word_embeddings, word_embeddings_layernorm, h, ln_f. Forward: input_ids (+ past_key_values) ->
/// Dict{last_hidden_state f32 [T, C], past_key_values}. position_ids are accepted and unused (ALiBi needs none).
/// HF: BloomModel
class BloomModel : public nn::Module {
 public:
  BloomModel(const BloomConfig& config, DType dtype);
  std::string type_name() const override { return "BloomModel"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Embedding> word_embeddings;
  std::shared_ptr<nn::LayerNorm> word_embeddings_layernorm;
  std::shared_ptr<nn::ModuleList> h;
  std::shared_ptr<nn::LayerNorm> ln_f;
};

/// BloomModel + lm_head (no bias; tied to word_embeddings when tie_word_embeddings, the default). Forward:
/// causal_lm.h's contract. HF: BloomForCausalLM
class BloomForCausalLM : public CausalLM {
 public:
  BloomForCausalLM(const BloomConfig& config, DType dtype);
  std::string type_name() const override { return "BloomForCausalLM"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  const BloomConfig& config() const noexcept { return config_; }

  std::shared_ptr<BloomModel> transformer;
  std::shared_ptr<nn::Linear> lm_head;

 private:
  BloomConfig config_;
};

/// Factory entry for the architecture registry.
std::shared_ptr<CausalLM> make_bloom(const ConfigJson& config, DType dtype);

}  // namespace ferry::models
