// GPT-J (Wang & Komatsuzaki, 2021, EleutherAI's mesh-transformer-jax): GPTJForCausalLM, after transformers'
// models/gptj/modeling_gptj.py.
//
// Legend: T = tokens, C = n_embd, H = n_head, D = C / H, R = rotary_dim (≤ D), I = n_inner (default 4C), V = vocab.
//
// Module tree and parameter names are transformers' (the checkpoint keys):
//   transformer.wte  transformer.drop  transformer.h.N.{ln_1, attn.{k,v,q,out}_proj, mlp.{fc_in, fc_out}}
//   transformer.ln_f  transformer.rotary_emb  lm_head (with bias, untied by default)
// The block is "parallel": attention and MLP both read ln_1(x), and their outputs are added to x together.
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

/// GPTJConfig: config.json keys (n_embd, n_layer, n_head, rotary_dim, ... or their hidden_size-style aliases).
struct GPTJConfig {
  int64_t vocab_size = 0;   // required
  int64_t n_embd = 0;       // required (alias hidden_size)
  int64_t n_layer = 0;      // required (alias num_hidden_layers)
  int64_t n_head = 0;       // required (alias num_attention_heads)
  int64_t n_positions = 2048;  // alias max_position_embeddings
  int64_t rotary_dim = 64;     // null: the whole head (D)
  int64_t n_inner = 0;         // default 4 · n_embd
  std::string activation_function = "gelu_new";
  double layer_norm_epsilon = 1e-5;
  double resid_pdrop = 0.0, embd_pdrop = 0.0;
  bool tie_word_embeddings = false;

  static GPTJConfig from_json(const ConfigJson& json);
};

/// Attention with partial, interleaved rotary embeddings (pairs (2i, 2i+1) of the first R dims). x: [T, C] -> [T, C].
/// Named arguments: position_ids i64 [T], position_embeddings (inv_freq [R/2]), past_key_values.
class GPTJAttention : public nn::Module {
 public:
  GPTJAttention(const GPTJConfig& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return "GPTJAttention"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> k_proj, v_proj, q_proj, out_proj;
  std::shared_ptr<nn::Dropout> resid_dropout;

 private:
  int64_t layer_idx_, num_heads_, head_dim_;
  float scaling_;
};

/// fc_out(act(fc_in(x))), both with bias. x: [T, C] -> [T, C].
class GPTJMLP : public nn::Module {
 public:
  GPTJMLP(int64_t intermediate_size, const GPTJConfig& config, DType dtype);
  std::string type_name() const override { return "GPTJMLP"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> fc_in, fc_out;
  std::shared_ptr<nn::Dropout> dropout;

 private:
  std::string activation_;
};

/// Parallel block: h = ln_1(x); out = x + attn(h) + mlp(h).
class GPTJBlock : public nn::Module {
 public:
  GPTJBlock(const GPTJConfig& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return "GPTJBlock"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::LayerNorm> ln_1;
  std::shared_ptr<GPTJAttention> attn;
  std::shared_ptr<GPTJMLP> mlp;
};

/// Embeddings, blocks, ln_f. Forward: input_ids (+ past_key_values, position_ids) ->
/// Dict{last_hidden_state f32 [T, C], past_key_values}.
class GPTJModel : public nn::Module {
 public:
  GPTJModel(const GPTJConfig& config, DType dtype);
  std::string type_name() const override { return "GPTJModel"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Embedding> wte;
  std::shared_ptr<nn::Dropout> drop;
  std::shared_ptr<nn::ModuleList> h;
  std::shared_ptr<nn::LayerNorm> ln_f;
  std::shared_ptr<nn::RotaryEmbedding> rotary_emb;
};

/// GPTJModel + lm_head (with bias). Forward: causal_lm.h's contract.
class GPTJForCausalLM : public CausalLM {
 public:
  GPTJForCausalLM(const GPTJConfig& config, DType dtype);
  std::string type_name() const override { return "GPTJForCausalLM"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  const GPTJConfig& config() const noexcept { return config_; }

  std::shared_ptr<GPTJModel> transformer;
  std::shared_ptr<nn::Linear> lm_head;

 private:
  GPTJConfig config_;
};

/// Factory entry for auto_model.
std::shared_ptr<CausalLM> make_gptj(const ConfigJson& config, DType dtype);

}  // namespace ferry::models
