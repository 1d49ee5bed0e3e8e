// GPT-2 (Radford et al., 2019, "Language Models are Unsupervised Multitask Learners"): GPT2LMHeadModel, after
// transformers' models/gpt2/modeling_gpt2.py.
//
// Legend: T = tokens, C = n_embd, H = n_head, D = C / H, I = n_inner (default 4C), V = vocab_size, P = n_positions.
//
// Module tree and parameter names are transformers' (the checkpoint keys):
//   transformer.wte  transformer.wpe  transformer.drop  transformer.h.N.{ln_1, attn.{c_attn, c_proj}, ln_2,
//   mlp.{c_fc, c_proj}}  transformer.ln_f  lm_head (tied to wte by default)
// Checkpoints saved from the bare GPT2Model (the original "gpt2" upload: "h.0.attn.c_attn.weight", no
// "transformer." prefix) load too: the loader adds the base_model_prefix, as transformers does.
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

namespace ferry::models {

/// GPT2Config: config.json keys (n_embd, n_layer, n_head, n_positions, ... or their hidden_size-style aliases).
struct GPT2Config {
  int64_t vocab_size = 0;   // required
  int64_t n_embd = 0;       // required (alias hidden_size)
  int64_t n_layer = 0;      // required (alias num_hidden_layers)
  int64_t n_head = 0;       // required (alias num_attention_heads)
  int64_t n_positions = 1024;  // alias max_position_embeddings
  int64_t n_inner = 0;         // default 4 · n_embd
  std::string activation_function = "gelu_new";
  double layer_norm_epsilon = 1e-5;
  double resid_pdrop = 0.1, embd_pdrop = 0.1, attn_pdrop = 0.1;
  bool scale_attn_weights = true;
  bool scale_attn_by_inverse_layer_idx = false;
  bool tie_word_embeddings = true;

  static GPT2Config from_json(const ConfigJson& json);
};

/// Causal self-attention with a fused q|k|v projection (c_attn, a Conv1D). x: [T, C] -> [T, C].
class GPT2Attention : public nn::Module {
 public:
  GPT2Attention(const GPT2Config& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return "GPT2Attention"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Conv1D> c_attn, c_proj;
  std::shared_ptr<nn::Dropout> attn_dropout, resid_dropout;

 private:
  int64_t layer_idx_, embed_dim_, num_heads_, head_dim_;
  float scaling_;
};

/// c_proj(act(c_fc(x))). x: [T, C] -> [T, C].
class GPT2MLP : public nn::Module {
 public:
  GPT2MLP(int64_t intermediate_size, const GPT2Config& config, DType dtype);
  std::string type_name() const override { return "GPT2MLP"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Conv1D> c_fc, c_proj;
  std::shared_ptr<nn::Dropout> dropout;

 private:
  std::string activation_;
};

/// Pre-LayerNorm block: h = x + attn(ln_1(x)); out = h + mlp(ln_2(h)).
class GPT2Block : public nn::Module {
 public:
  GPT2Block(const GPT2Config& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return "GPT2Block"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::LayerNorm> ln_1;
  std::shared_ptr<GPT2Attention> attn;
  std::shared_ptr<nn::LayerNorm> ln_2;
  std::shared_ptr<GPT2MLP> mlp;
};

/// Token + learned position embeddings, the blocks, ln_f. Forward: input_ids (+ past_key_values, position_ids) ->
/// Dict{last_hidden_state f32 [T, C], past_key_values}.
class GPT2Model : public nn::Module {
 public:
  GPT2Model(const GPT2Config& config, DType dtype);
  std::string type_name() const override { return "GPT2Model"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Embedding> wte, wpe;
  std::shared_ptr<nn::Dropout> drop;
  std::shared_ptr<nn::ModuleList> h;
  std::shared_ptr<nn::LayerNorm> ln_f;
};

/// GPT2Model + lm_head (no bias; tied to wte when tie_word_embeddings). Forward: causal_lm.h's contract.
class GPT2LMHeadModel : public CausalLM {
 public:
  GPT2LMHeadModel(const GPT2Config& config, DType dtype);
  std::string type_name() const override { return "GPT2LMHeadModel"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  const GPT2Config& config() const noexcept { return config_; }

  std::shared_ptr<GPT2Model> transformer;
  std::shared_ptr<nn::Linear> lm_head;

 private:
  GPT2Config config_;
};

/// Factory entry for auto_model.
std::shared_ptr<CausalLM> make_gpt2(const ConfigJson& config, DType dtype);

}  // namespace ferry::models
