// GPT-2 causal LM after transformers' modeling_gpt2.py (Radford et al., 2019).
//
// Where ferry differs from transformers, and why:
//  - Activations are f32 whatever the weights' dtype (see llama.cc).
//  - c_attn's q | k | v columns are split by copying (nn/split.h): views only slice the leading dimension.
//  - attn_dropout is registered (so the module tree matches) but never called: attention weights stay inside the
//    fused ops::attention, and dropout is the identity at inference anyway.
//  - reorder_and_upcast_attn only changes rounding in f16 training; ferry's attention is f32 throughout.
//  - Cross-attention (add_cross_attention) and token_type_ids are not supported (decoder-only inference).
//  - Like transformers, GPT2Model moves the position embeddings to the token embeddings' device before adding them
//    (the only device move in src/models; see GPT2Model::forward).
#include "ferry/models/gpt2.h"

#include <cmath>

#include "ferry/core/error.h"
#include "ferry/nn/activation.h"
#include "ferry/nn/split.h"
#include "ferry/ops/elementwise.h"

namespace ferry::models {

// ---- config -----------------------------------------------------------------------------------------------------

GPT2Config GPT2Config::from_json(const ConfigJson& json) {
  ConfigJson j = json;
  // transformers' GPT2Config.attribute_map
  j.set_aliases({{"n_embd", "hidden_size"},
                 {"n_positions", "max_position_embeddings"},
                 {"n_head", "num_attention_heads"},
                 {"n_layer", "num_hidden_layers"}});
  GPT2Config c;
  c.vocab_size = j.require_int("vocab_size");
  c.n_embd = j.require_int("n_embd");
  c.n_layer = j.require_int("n_layer");
  c.n_head = j.require_int("n_head");
  c.n_positions = j.get_int("n_positions", 1024);
  for (auto [key, v] : {std::pair{"vocab_size", c.vocab_size}, {"n_embd", c.n_embd}, {"n_layer", c.n_layer},
                        {"n_head", c.n_head}, {"n_positions", c.n_positions}})
    if (v <= 0) j.fail("\"" + std::string(key) + "\" must be positive, got " + std::to_string(v));
  if (c.n_embd % c.n_head != 0)
    j.fail("n_embd (" + std::to_string(c.n_embd) + ") must be a multiple of n_head (" + std::to_string(c.n_head) + ")");
  c.n_inner = j.get_int("n_inner", 4 * c.n_embd);
  if (c.n_inner <= 0) j.fail("\"n_inner\" must be positive, got " + std::to_string(c.n_inner));
  c.activation_function = j.get_string("activation_function", "gelu_new");
  nn::check_activation(c.activation_function);
  c.layer_norm_epsilon = j.get_float("layer_norm_epsilon", 1e-5);
  c.resid_pdrop = j.get_float("resid_pdrop", 0.1);
  c.embd_pdrop = j.get_float("embd_pdrop", 0.1);
  c.attn_pdrop = j.get_float("attn_pdrop", 0.1);
  c.scale_attn_weights = j.get_bool("scale_attn_weights", true);
  c.scale_attn_by_inverse_layer_idx = j.get_bool("scale_attn_by_inverse_layer_idx", false);
  c.tie_word_embeddings = j.get_bool("tie_word_embeddings", true);
  if (j.get_bool("add_cross_attention", false))
    j.fail("add_cross_attention is not supported", "ferry runs GPT-2 as a decoder-only language model.");
  return c;
}

// ---- modules ----------------------------------------------------------------------------------------------------

GPT2Attention::GPT2Attention(const GPT2Config& c, int64_t layer_idx, DType dtype)
    : layer_idx_(layer_idx), embed_dim_(c.n_embd), num_heads_(c.n_head), head_dim_(c.n_embd / c.n_head) {
  double scaling = c.scale_attn_weights ? 1.0 / std::sqrt(static_cast<double>(head_dim_)) : 1.0;
  if (c.scale_attn_by_inverse_layer_idx) scaling /= static_cast<double>(layer_idx + 1);
  scaling_ = static_cast<float>(scaling);
  c_attn = register_module("c_attn", std::make_shared<nn::Conv1D>(3 * embed_dim_, embed_dim_, dtype));
  c_proj = register_module("c_proj", std::make_shared<nn::Conv1D>(embed_dim_, embed_dim_, dtype));
  attn_dropout = register_module("attn_dropout", std::make_shared<nn::Dropout>(c.attn_pdrop));
  resid_dropout = register_module("resid_dropout", std::make_shared<nn::Dropout>(c.resid_pdrop));
}

// x: [T, C] -> [T, C]
nn::Value GPT2Attention::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  const int64_t t = x.size(0);
  std::vector<Tensor> qkv = nn::split_last_dim((*c_attn)(x), {embed_dim_, embed_dim_, embed_dim_});
  Tensor q = qkv[0].reshape({t, num_heads_, head_dim_});
  Tensor k = qkv[1].reshape({t, num_heads_, head_dim_});
  Tensor v = qkv[2].reshape({t, num_heads_, head_dim_});

  // Each sequence's queries attend to its own cached keys and values (one cache, or a KvCacheBatch).
  Tensor o = cached_attention(args, type_name(), layer_idx_, q, k, v, scaling_);
  return (*resid_dropout)((*c_proj)(o.reshape({t, embed_dim_})));
}

GPT2MLP::GPT2MLP(int64_t intermediate_size, const GPT2Config& c, DType dtype) : activation_(c.activation_function) {
  c_fc = register_module("c_fc", std::make_shared<nn::Conv1D>(intermediate_size, c.n_embd, dtype));
  c_proj = register_module("c_proj", std::make_shared<nn::Conv1D>(c.n_embd, intermediate_size, dtype));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(c.resid_pdrop));
}

// x: [T, C] -> [T, C]
nn::Value GPT2MLP::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  return (*dropout)((*c_proj)(nn::activation(activation_, (*c_fc)(x))));
}

GPT2Block::GPT2Block(const GPT2Config& c, int64_t layer_idx, DType dtype) {
  ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(c.n_embd, c.layer_norm_epsilon, true, true, dtype));
  attn = register_module("attn", std::make_shared<GPT2Attention>(c, layer_idx, dtype));
  ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(c.n_embd, c.layer_norm_epsilon, true, true, dtype));
  mlp = register_module("mlp", std::make_shared<GPT2MLP>(c.n_inner, c, dtype));
}

// x: [T, C] -> [T, C]; the named arguments (past_key_values) go on to attn.
nn::Value GPT2Block::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  Tensor h = ops::add(x, (*attn)(nn::Args({(*ln_1)(x)}, args.kwargs)).tensor());
  ops::add_(h, (*mlp)((*ln_2)(h)));
  return h;
}

GPT2Model::GPT2Model(const GPT2Config& c, DType dtype) {
  wte = register_module("wte", std::make_shared<nn::Embedding>(c.vocab_size, c.n_embd, dtype));
  wpe = register_module("wpe", std::make_shared<nn::Embedding>(c.n_positions, c.n_embd, dtype));
  drop = register_module("drop", std::make_shared<nn::Dropout>(c.embd_pdrop));
  h = register_module("h", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.n_layer; ++i) h->push_back(std::make_shared<GPT2Block>(c, i, dtype));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(c.n_embd, c.layer_norm_epsilon, true, true, dtype));
}

// input_ids [T] -> Dict{last_hidden_state: f32 [T, C], past_key_values}
nn::Value GPT2Model::forward(const nn::Args& args) {
  CausalLMInputs in = parse_causal_lm_inputs(args, static_cast<int64_t>(h->size()), type_name());
  const int64_t positions = wpe->num_embeddings();
  if (in.max_context > positions)
    throw Error("context of " + std::to_string(in.max_context) + " tokens exceeds n_positions = " +
                    std::to_string(positions),
                type_name(), "GPT-2 has learned positions only up to n_positions; shorten the prompt or generation.");
  Tensor inputs_embeds = (*wte)(in.input_ids);
  // The one device move in ferry's model files, as in transformers (`position_embeds.to(inputs_embeds.device)`):
  // wte and wpe are separate top-level modules, so a plan may put them on different devices, and no hook sits
  // between their outputs and this sum. Resident, it is a no-op.
  Tensor hidden = ops::add(inputs_embeds, (*wpe)(in.position_ids).to(inputs_embeds.device()));
  hidden = (*drop)(hidden);
  for (std::size_t i = 0; i < h->size(); ++i) {
    nn::Args block_args{hidden};
    block_args.with("past_key_values", in.cache).with("position_ids", in.position_ids);
    hidden = (*h)[i](std::move(block_args)).tensor();
  }
  return nn::Dict{{"last_hidden_state", (*ln_f)(hidden)}, {"past_key_values", in.cache}};
}

namespace {

CausalLMInfo gpt2_info(const GPT2Config& c) {
  CausalLMInfo i;
  i.architecture = "GPT2LMHeadModel";
  i.model_type = "gpt2";
  i.block_class = "GPT2Block";
  i.base_model_prefix = "transformer";
  i.layers_prefix = "transformer.h";
  i.vocab_size = c.vocab_size;
  i.hidden_size = c.n_embd;
  i.num_cached_layers = c.n_layer;
  i.num_attention_heads = i.num_key_value_heads = c.n_head;
  i.head_dim = c.n_embd / c.n_head;
  i.max_position_embeddings = c.n_positions;
  i.tie_word_embeddings = c.tie_word_embeddings;
  return i;
}

}  // namespace

GPT2LMHeadModel::GPT2LMHeadModel(const GPT2Config& c, DType dtype) : CausalLM(gpt2_info(c)), config_(c) {
  transformer = register_module("transformer", std::make_shared<GPT2Model>(c, dtype));
  lm_head = register_lm_head(*this, *transformer->wte, c.n_embd, c.vocab_size, c.tie_word_embeddings, dtype);
}

// causal_lm.h's forward contract.
nn::Value GPT2LMHeadModel::forward(const nn::Args& args) {
  return forward_through_head(*transformer, *lm_head, args, type_name());
}

std::shared_ptr<CausalLM> make_gpt2(const ConfigJson& config, DType dtype) {
  return std::make_shared<GPT2LMHeadModel>(GPT2Config::from_json(config), dtype);
}

}  // namespace ferry::models
