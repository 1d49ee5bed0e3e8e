// OPT (Zhang et al., 2022, "OPT: Open Pre-trained Transformer Language Models", Meta AI): OPTForCausalLM, after
// transformers' models/opt/modeling_opt.py.
//
// Legend: T = tokens, C = hidden_size, H = num_attention_heads, D = C / H, F = ffn_dim, V = vocab_size,
// P = word_embed_proj_dim (default C), N = max_position_embeddings.
//
// Module tree and parameter names are transformers' (the checkpoint keys):
//   model.decoder.{embed_tokens [V, P], embed_positions [N + 2, C], project_out, project_in (both only when P ≠ C),
//                  final_layer_norm (only with do_layer_norm_before), layers.N.{self_attn.{k,v,q,out}_proj,
//                  self_attn_layer_norm, fc1, fc2, final_layer_norm}}
//   lm_head [V, P] (no bias, tied to embed_tokens by default)
// Checkpoints of the bare OPTModel ("decoder.layers.0...", Meta's uploads) load too: the loader adds "model.".
// Positions are learned, looked up at position + 2 (OPTLearnedPositionalEmbedding's offset).
// do_layer_norm_before (all OPT sizes but 350m): x + attn(ln(x)), then h + mlp(ln(h)); otherwise (opt-350m) the
// norms follow the residual sums: ln(x + attn(x)), then ln(h + mlp(h)), and the decoder has no final_layer_norm.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ferry/core/dtype.h"
#include "ferry/models/causal_lm.h"
#include "ferry/models/config.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/embedding.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/norm.h"

namespace ferry::models {

/// OPTConfig: config.json keys.
struct OPTConfig {
  int64_t vocab_size = 0;           // required
  int64_t hidden_size = 0;          // required
  int64_t num_hidden_layers = 0;    // required
  int64_t num_attention_heads = 0;  // required
  int64_t ffn_dim = 0;              // required
  int64_t max_position_embeddings = 2048;
  int64_t word_embed_proj_dim = 0;  // default (absent or null): hidden_size
  bool do_layer_norm_before = true;
  bool remove_final_layer_norm = false;  // "_remove_final_layer_norm"
  bool enable_bias = true;               // attention projections, fc1, fc2
  bool layer_norm_elementwise_affine = true;
  std::string activation_function = "relu";
  double dropout = 0.1, attention_dropout = 0.0;
  bool tie_word_embeddings = true;

  int64_t head_dim() const noexcept { return hidden_size / num_attention_heads; }

  static OPTConfig from_json(const ConfigJson& json);
};

/// Learned positions, looked up at position_ids + 2 (the table has N + 2 rows). Forward: position_ids i64 [T] ->
/// f32 [T, C].
class OPTLearnedPositionalEmbedding : public nn::Embedding {
 public:
  static constexpr int64_t kOffset = 2;
  OPTLearnedPositionalEmbedding(int64_t num_embeddings, int64_t embedding_dim, DType dtype)
      : nn::Embedding(num_embeddings + kOffset, embedding_dim, dtype) {}
  std::string type_name() const override { return "OPTLearnedPositionalEmbedding"; }
};

/// Multi-head attention, queries scaled by D^-1/2 after q_proj. x: [T, C] -> [T, C].
/// Named arguments: past_key_values.
class OPTAttention : public nn::Module {
 public:
  OPTAttention(const OPTConfig& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return "OPTAttention"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> k_proj, v_proj, q_proj, out_proj;

 private:
  int64_t layer_idx_, num_heads_, head_dim_;
  float scaling_;
};

/// One layer: attention and fc2(act(fc1)), each with its residual, LayerNorms before or after (see the file
/// comment). x: [T, C] -> [T, C].
class OPTDecoderLayer : public nn::Module {
 public:
  OPTDecoderLayer(const OPTConfig& config, int64_t layer_idx, DType dtype);
  std::string type_name() const override { return "OPTDecoderLayer"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<OPTAttention> self_attn;
  std::shared_ptr<nn::LayerNorm> self_attn_layer_norm;
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::LayerNorm> final_layer_norm;

 private:
  bool do_layer_norm_before_;
  std::string activation_;
};

/// Embeddings, projections, layers, final_layer_norm. Forward: input_ids (+ past_key_values, position_ids) ->
/// Dict{last_hidden_state f32 [T, P], past_key_values}.
class OPTDecoder : public nn::Module {
 public:
  OPTDecoder(const OPTConfig& config, DType dtype);
  std::string type_name() const override { return "OPTDecoder"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Embedding> embed_tokens;
  std::shared_ptr<OPTLearnedPositionalEmbedding> embed_positions;
  std::shared_ptr<nn::Linear> project_out, project_in;  // nullptr when P = C
  std::shared_ptr<nn::LayerNorm> final_layer_norm;      // nullptr without do_layer_norm_before
  std::shared_ptr<nn::ModuleList> layers;
};

/// OPTModel: the decoder. Forward: as OPTDecoder's.
class OPTModel : public nn::Module {
 public:
  OPTModel(const OPTConfig& config, DType dtype);
  std::string type_name() const override { return "OPTModel"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<OPTDecoder> decoder;
};

/// OPTModel + lm_head (no bias; tied to embed_tokens when tie_word_embeddings). Forward: causal_lm.h's contract.
class OPTForCausalLM : public CausalLM {
 public:
  OPTForCausalLM(const OPTConfig& config, DType dtype);
  std::string type_name() const override { return "OPTForCausalLM"; }
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  const OPTConfig& config() const noexcept { return config_; }

  std::shared_ptr<OPTModel> model;
  std::shared_ptr<nn::Linear> lm_head;

 private:
  OPTConfig config_;
};

/// Factory entry for the architecture registry.
std::shared_ptr<CausalLM> make_opt(const ConfigJson& config, DType dtype);

}  // namespace ferry::models
