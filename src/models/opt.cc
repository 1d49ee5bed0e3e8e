// OPT causal LM after transformers' modeling_opt.py (transformers 5.24).
//
// Where ferry differs from transformers, and why:
//  - Activations are f32 whatever the weights' dtype (see llama.cc).
//  - Positions are the forward contract's position_ids (each sequence's cache length + 0..T-1 by default), not
//    transformers' cumsum over an attention mask: without padding, which ferry's batches never need (each sequence
//    has its own cache), the two are the same numbers.
//  - Dropout and layerdrop are training-only (transformers calls them functionally; there are no modules to keep).
//  - Like transformers, the decoder moves the position embeddings to the token embeddings' device before adding
//    them (see OPTDecoder::forward; gpt2.cc has the same move for the same reason).
#include "ferry/models/opt.h"

#include <cmath>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/nn/activation.h"
#include "ferry/ops/elementwise.h"

namespace ferry::models {

// ---- config -----------------------------------------------------------------------------------------------------

OPTConfig OPTConfig::from_json(const ConfigJson& j) {
  OPTConfig c;
  c.vocab_size = j.require_int("vocab_size");
  c.hidden_size = j.require_int("hidden_size");
  c.num_hidden_layers = j.require_int("num_hidden_layers");
  c.num_attention_heads = j.require_int("num_attention_heads");
  c.ffn_dim = j.require_int("ffn_dim");
  c.max_position_embeddings = j.get_int("max_position_embeddings", 2048);
  c.word_embed_proj_dim = j.get_int("word_embed_proj_dim", c.hidden_size);
  for (auto [key, v] : {std::pair{"vocab_size", c.vocab_size},
                        {"hidden_size", c.hidden_size},
                        {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads},
                        {"ffn_dim", c.ffn_dim},
                        {"max_position_embeddings", c.max_position_embeddings},
                        {"word_embed_proj_dim", c.word_embed_proj_dim}})
    if (v <= 0) j.fail("\"" + std::string(key) + "\" must be positive, got " + std::to_string(v));
  if (c.hidden_size % c.num_attention_heads != 0)
    j.fail("hidden_size (" + std::to_string(c.hidden_size) + ") must be a multiple of num_attention_heads (" +
           std::to_string(c.num_attention_heads) + ")");
  c.do_layer_norm_before = j.get_bool("do_layer_norm_before", true);
  c.remove_final_layer_norm = j.get_bool("_remove_final_layer_norm", false);
  c.enable_bias = j.get_bool("enable_bias", true);
  c.layer_norm_elementwise_affine = j.get_bool("layer_norm_elementwise_affine", true);
  c.activation_function = j.get_string("activation_function", "relu");
  try {
    nn::check_activation(c.activation_function);
  } catch (const Error& e) {
    j.fail("activation_function \"" + c.activation_function + "\" is not supported", e.hint());
  }
  c.dropout = j.get_float("dropout", 0.1);
  c.attention_dropout = j.get_float("attention_dropout", 0.0);
  c.tie_word_embeddings = j.get_bool("tie_word_embeddings", true);
  return c;
}

// ---- modules ----------------------------------------------------------------------------------------------------

OPTAttention::OPTAttention(const OPTConfig& c, int64_t layer_idx, DType dtype)
    : layer_idx_(layer_idx),
      num_heads_(c.num_attention_heads),
      head_dim_(c.head_dim()),
      scaling_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim())))) {
  // transformers' order: k, v, q, out.
  const int64_t e = c.hidden_size;
  k_proj = register_module("k_proj", std::make_shared<nn::Linear>(e, e, c.enable_bias, dtype));
  v_proj = register_module("v_proj", std::make_shared<nn::Linear>(e, e, c.enable_bias, dtype));
  q_proj = register_module("q_proj", std::make_shared<nn::Linear>(e, e, c.enable_bias, dtype));
  out_proj = register_module("out_proj", std::make_shared<nn::Linear>(e, e, c.enable_bias, dtype));
}

// x: [T, C] -> [T, C]
nn::Value OPTAttention::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  const int64_t t = x.size(0);
  // transformers scales the projected queries (bias included), then attends with scale 1.
  Tensor q = ops::scale((*q_proj)(x), scaling_).reshape({t, num_heads_, head_dim_});
  Tensor k = (*k_proj)(x).reshape({t, num_heads_, head_dim_});
  Tensor v = (*v_proj)(x).reshape({t, num_heads_, head_dim_});
  // Each sequence's queries attend to its own cached keys and values (one cache, or a KvCacheBatch).
  Tensor o = cached_attention(args, type_name(), layer_idx_, q, k, v, 1.0f);
  return (*out_proj)(o.reshape({t, num_heads_ * head_dim_}));
}

OPTDecoderLayer::OPTDecoderLayer(const OPTConfig& c, int64_t layer_idx, DType dtype)
    : do_layer_norm_before_(c.do_layer_norm_before), activation_(c.activation_function) {
  const bool affine = c.layer_norm_elementwise_affine;
  self_attn = register_module("self_attn", std::make_shared<OPTAttention>(c, layer_idx, dtype));
  self_attn_layer_norm = register_module("self_attn_layer_norm",
                                         std::make_shared<nn::LayerNorm>(c.hidden_size, 1e-5, affine, affine, dtype));
  fc1 = register_module("fc1", std::make_shared<nn::Linear>(c.hidden_size, c.ffn_dim, c.enable_bias, dtype));
  fc2 = register_module("fc2", std::make_shared<nn::Linear>(c.ffn_dim, c.hidden_size, c.enable_bias, dtype));
  final_layer_norm = register_module("final_layer_norm",
                                     std::make_shared<nn::LayerNorm>(c.hidden_size, 1e-5, affine, affine, dtype));
}

// x: [T, C] -> [T, C]; the named arguments (past_key_values) go on to self_attn.
nn::Value OPTDecoderLayer::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  const Tensor attn_in = do_layer_norm_before_ ? (*self_attn_layer_norm)(x) : x;
  Tensor h = ops::add(x, (*self_attn)(nn::Args({attn_in}, args.kwargs)).tensor());
  if (!do_layer_norm_before_) h = (*self_attn_layer_norm)(h);
  const Tensor mlp_in = do_layer_norm_before_ ? (*final_layer_norm)(h) : h;
  Tensor out = ops::add(h, (*fc2)(nn::activation(activation_, (*fc1)(mlp_in))));
  if (!do_layer_norm_before_) out = (*final_layer_norm)(out);
  return out;
}

OPTDecoder::OPTDecoder(const OPTConfig& c, DType dtype) {
  // transformers' registration order (module order is plan order): embeddings, projections, final norm, layers.
  embed_tokens = register_module("embed_tokens",
                                 std::make_shared<nn::Embedding>(c.vocab_size, c.word_embed_proj_dim, dtype));
  embed_positions = register_module("embed_positions",
                                    std::make_shared<OPTLearnedPositionalEmbedding>(c.max_position_embeddings,
                                                                                    c.hidden_size, dtype));
  if (c.word_embed_proj_dim != c.hidden_size) {
    project_out = register_module("project_out",
                                  std::make_shared<nn::Linear>(c.hidden_size, c.word_embed_proj_dim, false, dtype));
    project_in = register_module("project_in",
                                 std::make_shared<nn::Linear>(c.word_embed_proj_dim, c.hidden_size, false, dtype));
  }
  if (c.do_layer_norm_before && !c.remove_final_layer_norm) {
    const bool affine = c.layer_norm_elementwise_affine;
    final_layer_norm = register_module("final_layer_norm",
                                       std::make_shared<nn::LayerNorm>(c.hidden_size, 1e-5, affine, affine, dtype));
  }
  layers = register_module("layers", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(std::make_shared<OPTDecoderLayer>(c, i, dtype));
}

// input_ids [T] -> Dict{last_hidden_state: f32 [T, P], past_key_values}
nn::Value OPTDecoder::forward(const nn::Args& args) {
  CausalLMInputs in = parse_causal_lm_inputs(args, static_cast<int64_t>(layers->size()), type_name());
  const int64_t positions = embed_positions->num_embeddings() - OPTLearnedPositionalEmbedding::kOffset;
  if (in.max_context > positions)
    throw Error("context of " + std::to_string(in.max_context) +
                    " tokens exceeds max_position_embeddings = " + std::to_string(positions),
                type_name(),
                "OPT has learned positions only up to max_position_embeddings; shorten the prompt or "
                "generation.");
  std::vector<int64_t> ids = in.position_ids.to(Device::cpu()).to_vector<int64_t>();
  for (int64_t& id : ids) id += OPTLearnedPositionalEmbedding::kOffset;
  const Tensor position_ids = Tensor::from_vector(ids, {static_cast<int64_t>(ids.size())});

  Tensor inputs_embeds = (*embed_tokens)(in.input_ids);
  if (project_in) inputs_embeds = (*project_in)(inputs_embeds);
  // As in transformers (`pos_embeds.to(inputs_embeds.device)`): embed_positions and the token path are separate
  // modules a plan may put on different devices, with no hook between their outputs and this sum.
  Tensor hidden = ops::add(inputs_embeds, (*embed_positions)(position_ids).to(inputs_embeds.device()));
  for (std::size_t i = 0; i < layers->size(); ++i) {
    nn::Args layer_args{hidden};
    layer_args.with("past_key_values", in.cache).with("position_ids", in.position_ids);
    hidden = (*layers)[i](std::move(layer_args)).tensor();
  }
  if (final_layer_norm) hidden = (*final_layer_norm)(hidden);
  if (project_out) hidden = (*project_out)(hidden);
  return nn::Dict{{"last_hidden_state", hidden}, {"past_key_values", in.cache}};
}

OPTModel::OPTModel(const OPTConfig& c, DType dtype) {
  decoder = register_module("decoder", std::make_shared<OPTDecoder>(c, dtype));
}

nn::Value OPTModel::forward(const nn::Args& args) { return (*decoder)(args); }

namespace {

CausalLMInfo opt_info(const OPTConfig& c) {
  CausalLMInfo i;
  i.architecture = "OPTForCausalLM";
  i.model_type = "opt";
  i.block_class = "OPTDecoderLayer";
  i.base_model_prefix = "model";
  i.layers_prefix = "model.decoder.layers";
  i.vocab_size = c.vocab_size;
  i.hidden_size = c.hidden_size;
  i.num_cached_layers = c.num_hidden_layers;
  i.num_attention_heads = i.num_key_value_heads = c.num_attention_heads;
  i.head_dim = c.head_dim();
  i.max_position_embeddings = c.max_position_embeddings;
  i.tie_word_embeddings = c.tie_word_embeddings;
  return i;
}

}  // namespace

OPTForCausalLM::OPTForCausalLM(const OPTConfig& c, DType dtype) : CausalLM(opt_info(c)), config_(c) {
  model = register_module("model", std::make_shared<OPTModel>(c, dtype));
  lm_head = register_lm_head(*this, *model->decoder->embed_tokens, c.word_embed_proj_dim, c.vocab_size,
                             c.tie_word_embeddings, dtype);
}

// causal_lm.h's forward contract.
nn::Value OPTForCausalLM::forward(const nn::Args& args) {
  return forward_through_head(*model, *lm_head, args, type_name());
}

std::shared_ptr<CausalLM> make_opt(const ConfigJson& config, DType dtype) {
  return std::make_shared<OPTForCausalLM>(OPTConfig::from_json(config), dtype);
}

}  // namespace ferry::models
