// GPT-J causal LM after transformers' modeling_gptj.py.
//
// Where ferry differs from transformers, and why:
//  - Activations are f32 whatever the weights' dtype (see llama.cc).
//  - rotary_emb holds inv_freq [R/2] instead of transformers' sin|cos table embed_positions [n_positions, R]: the
//    table is a non-persistent buffer (never in checkpoints), and ops::apply_rotary_ computes the same f32 angles
//    positions[t] · inv_freq[i] on the fly. Plans therefore count n_positions · R · 4 bytes less for rotary_emb
//    than Accelerate does for the same model.
//  - rotary_dim = null means the whole head; transformers would size its table by n_embd instead and fail.
#include "ferry/models/gptj.h"

#include <cmath>

#include "ferry/core/error.h"
#include "ferry/nn/activation.h"
#include "ferry/ops/elementwise.h"
#include "ferry/ops/rotary.h"

namespace ferry::models {

// ---- config -----------------------------------------------------------------------------------------------------

GPTJConfig GPTJConfig::from_json(const ConfigJson& json) {
  ConfigJson j = json;
  // transformers' GPTJConfig.attribute_map
  j.set_aliases({{"n_embd", "hidden_size"},
                 {"n_positions", "max_position_embeddings"},
                 {"n_head", "num_attention_heads"},
                 {"n_layer", "num_hidden_layers"}});
  GPTJConfig c;
  c.vocab_size = j.require_int("vocab_size");
  c.n_embd = j.require_int("n_embd");
  c.n_layer = j.require_int("n_layer");
  c.n_head = j.require_int("n_head");
  c.n_positions = j.get_int("n_positions", 2048);
  for (auto [key, v] : {std::pair{"vocab_size", c.vocab_size}, {"n_embd", c.n_embd}, {"n_layer", c.n_layer},
                        {"n_head", c.n_head}, {"n_positions", c.n_positions}})
    if (v <= 0) j.fail("\"" + std::string(key) + "\" must be positive, got " + std::to_string(v));
  if (c.n_embd % c.n_head != 0)
    j.fail("n_embd (" + std::to_string(c.n_embd) + ") must be a multiple of n_head (" + std::to_string(c.n_head) + ")");
  const int64_t head_dim = c.n_embd / c.n_head;
  c.rotary_dim = j.json().contains("rotary_dim") ? j.get_optional_int("rotary_dim").value_or(head_dim) : 64;
  if (c.rotary_dim <= 0 || c.rotary_dim > head_dim || c.rotary_dim % 2 != 0)
    j.fail("rotary_dim " + std::to_string(c.rotary_dim) + " must be even and between 2 and the head size " +
           std::to_string(head_dim));
  c.n_inner = j.get_int("n_inner", 4 * c.n_embd);
  if (c.n_inner <= 0) j.fail("\"n_inner\" must be positive, got " + std::to_string(c.n_inner));
  c.activation_function = j.get_string("activation_function", "gelu_new");
  nn::check_activation(c.activation_function);
  c.layer_norm_epsilon = j.get_float("layer_norm_epsilon", 1e-5);
  c.resid_pdrop = j.get_float("resid_pdrop", 0.0);
  c.embd_pdrop = j.get_float("embd_pdrop", 0.0);
  c.tie_word_embeddings = j.get_bool("tie_word_embeddings", false);
  return c;
}

// ---- modules ----------------------------------------------------------------------------------------------------

GPTJAttention::GPTJAttention(const GPTJConfig& c, int64_t layer_idx, DType dtype)
    : layer_idx_(layer_idx),
      num_heads_(c.n_head),
      head_dim_(c.n_embd / c.n_head),
      scaling_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.n_embd / c.n_head)))) {
  // transformers' order: k, v, q, out.
  k_proj = register_module("k_proj", std::make_shared<nn::Linear>(c.n_embd, c.n_embd, false, dtype));
  v_proj = register_module("v_proj", std::make_shared<nn::Linear>(c.n_embd, c.n_embd, false, dtype));
  q_proj = register_module("q_proj", std::make_shared<nn::Linear>(c.n_embd, c.n_embd, false, dtype));
  out_proj = register_module("out_proj", std::make_shared<nn::Linear>(c.n_embd, c.n_embd, false, dtype));
  resid_dropout = register_module("resid_dropout", std::make_shared<nn::Dropout>(c.resid_pdrop));
}

// x: [T, C] -> [T, C]
nn::Value GPTJAttention::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  const Tensor& position_ids = required_tensor_kwarg(args, "position_ids", type_name());
  const Tensor& inv_freq = required_tensor_kwarg(args, "position_embeddings", type_name());
  const int64_t t = x.size(0);

  Tensor q = (*q_proj)(x).reshape({t, num_heads_, head_dim_});
  Tensor k = (*k_proj)(x).reshape({t, num_heads_, head_dim_});
  Tensor v = (*v_proj)(x).reshape({t, num_heads_, head_dim_});
  // Only the first R = 2 · inv_freq.size dims of each head rotate, in adjacent pairs (rotate_every_two).
  ops::apply_rotary_(q, position_ids, inv_freq, ops::RopeLayout::Interleaved);
  ops::apply_rotary_(k, position_ids, inv_freq, ops::RopeLayout::Interleaved);

  // Each sequence's queries attend to its own cached keys and values (one cache, or a KvCacheBatch).
  Tensor o = cached_attention(args, type_name(), layer_idx_, q, k, v, scaling_);
  return (*resid_dropout)((*out_proj)(o.reshape({t, num_heads_ * head_dim_})));
}

GPTJMLP::GPTJMLP(int64_t intermediate_size, const GPTJConfig& c, DType dtype) : activation_(c.activation_function) {
  fc_in = register_module("fc_in", std::make_shared<nn::Linear>(c.n_embd, intermediate_size, true, dtype));
  fc_out = register_module("fc_out", std::make_shared<nn::Linear>(intermediate_size, c.n_embd, true, dtype));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(c.resid_pdrop));
}

// x: [T, C] -> [T, C]
nn::Value GPTJMLP::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  return (*dropout)((*fc_out)(nn::activation(activation_, (*fc_in)(x))));
}

GPTJBlock::GPTJBlock(const GPTJConfig& c, int64_t layer_idx, DType dtype) {
  ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(c.n_embd, c.layer_norm_epsilon, true, true, dtype));
  attn = register_module("attn", std::make_shared<GPTJAttention>(c, layer_idx, dtype));
  mlp = register_module("mlp", std::make_shared<GPTJMLP>(c.n_inner, c, dtype));
}

// x: [T, C] -> [T, C]; the named arguments go on to attn.
nn::Value GPTJBlock::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  Tensor h = (*ln_1)(x);
  Tensor out = ops::add((*attn)(nn::Args({h}, args.kwargs)).tensor(), (*mlp)(h));
  ops::add_(out, x);
  return out;
}

GPTJModel::GPTJModel(const GPTJConfig& c, DType dtype) {
  wte = register_module("wte", std::make_shared<nn::Embedding>(c.vocab_size, c.n_embd, dtype));
  drop = register_module("drop", std::make_shared<nn::Dropout>(c.embd_pdrop));
  h = register_module("h", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.n_layer; ++i) h->push_back(std::make_shared<GPTJBlock>(c, i, dtype));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(c.n_embd, c.layer_norm_epsilon, true, true, dtype));
  // create_sinusoidal_positions: theta 10000, no scaling.
  rotary_emb = register_module("rotary_emb", std::make_shared<nn::RotaryEmbedding>(
                                                 "GPTJRotaryEmbedding", c.rotary_dim, nn::RopeParameters{}, false));
}

// input_ids [T] -> Dict{last_hidden_state: f32 [T, C], past_key_values}
nn::Value GPTJModel::forward(const nn::Args& args) {
  CausalLMInputs in = parse_causal_lm_inputs(args, static_cast<int64_t>(h->size()), type_name());
  Tensor hidden = (*drop)((*wte)(in.input_ids));
  Tensor inv_freq = (*rotary_emb)(nn::Args{}).tensor();
  for (std::size_t i = 0; i < h->size(); ++i) {
    nn::Args block_args{hidden};
    block_args.with("position_ids", in.position_ids)
        .with("past_key_values", in.cache)
        .with("position_embeddings", inv_freq);
    hidden = (*h)[i](std::move(block_args)).tensor();
  }
  return nn::Dict{{"last_hidden_state", (*ln_f)(hidden)}, {"past_key_values", in.cache}};
}

namespace {

CausalLMInfo gptj_info(const GPTJConfig& c) {
  CausalLMInfo i;
  i.architecture = "GPTJForCausalLM";
  i.model_type = "gptj";
  i.block_class = "GPTJBlock";
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

GPTJForCausalLM::GPTJForCausalLM(const GPTJConfig& c, DType dtype) : CausalLM(gptj_info(c)), config_(c) {
  transformer = register_module("transformer", std::make_shared<GPTJModel>(c, dtype));
  lm_head = register_lm_head(*this, *transformer->wte, c.n_embd, c.vocab_size, c.tie_word_embeddings, dtype,
                             /*bias=*/true);
}

// causal_lm.h's forward contract.
nn::Value GPTJForCausalLM::forward(const nn::Args& args) {
  return forward_through_head(*transformer, *lm_head, args, type_name());
}

std::shared_ptr<CausalLM> make_gptj(const ConfigJson& config, DType dtype) {
  return std::make_shared<GPTJForCausalLM>(GPTJConfig::from_json(config), dtype);
}

}  // namespace ferry::models
