// BLOOM causal LM after transformers' modeling_bloom.py and configuration_bloom.py (transformers 5.24).
//
// Where ferry differs from transformers, and why:
//  - Activations are f32 whatever the weights' dtype (see llama.cc); the ALiBi bias is therefore f32 too, where
//    transformers casts it to the hidden states' dtype (bf16 for a bf16 model).
//  - The bias is built per sequence from its own cache length (keys at positions 0 .. S-1), which is what
//    transformers' build_alibi_tensor computes for an unpadded row (attention_mask.cumsum - 1). ferry's batches are
//    flattened without padding (kv_cache.h), so no left-padded row's shifted positions arise. It is materialised as
//    [H, T, S] f32 for ops::attention_with_bias: H · T · S floats per layer during a prompt's forward.
//  - query_key_value's per-head q | k | v blocks are split by copying (nn/split.h): views only slice the leading
//    dimension.
//  - bloom_gelu (0.79788456 for √(2/π)) runs as ops::gelu_tanh with √(2/π) in full f32 precision: the constants
//    differ by 6e-9 relative. BloomGelu holds no tensors and is not a module here (nn/activation.h).
//  - pretraining_tp > 1 with slow_but_exact sums dense and dense_4h_to_h in pretraining_tp column slices; the
//    result is the same sum in another order, so ferry runs one matmul whatever they are.
//  - attention_dropout and the hidden dropouts are identities (inference); attention_dropout is registered so the
//    tree matches.
//  - vocab_size, the hidden size, n_layer and n_head are required: BloomConfig's defaults (250880, 64, 2, 8) describe
//    no released checkpoint, and every BLOOM config.json gives them.
#include "ferry/models/bloom.h"

#include <cmath>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/nn/split.h"
#include "ferry/ops/attention.h"
#include "ferry/ops/elementwise.h"

namespace ferry::models {

// ---- config -----------------------------------------------------------------------------------------------------

BloomConfig BloomConfig::from_json(const ConfigJson& json) {
  ConfigJson j = json;
  // BloomConfig.attribute_map (the first name of each pair wins when both are present), and n_embed, which
  // BloomConfig.__post_init__ takes over hidden_size.
  j.set_aliases({{"num_hidden_layers", "n_layer"}, {"num_attention_heads", "n_head"}, {"n_embed", "hidden_size"}});
  BloomConfig c;
  c.vocab_size = j.require_int("vocab_size");
  c.hidden_size = j.require_int("n_embed");
  c.n_layer = j.require_int("num_hidden_layers");
  c.n_head = j.require_int("num_attention_heads");
  const std::pair<const char*, int64_t> sizes[] = {{"vocab_size", c.vocab_size},
                                                   {"n_embed/hidden_size", c.hidden_size},
                                                   {"n_layer", c.n_layer},
                                                   {"n_head", c.n_head}};
  for (const auto& [key, value] : sizes)
    if (value <= 0) j.fail("\"" + std::string(key) + "\" must be positive, got " + std::to_string(value));
  if (c.hidden_size % c.n_head != 0)
    j.fail("the hidden size (" + std::to_string(c.hidden_size) + ") must be a multiple of n_head (" +
               std::to_string(c.n_head) + ")",
           "BloomAttention splits the hidden size into n_head heads of equal size; check n_embed and n_head.");
  c.layer_norm_epsilon = j.get_float("layer_norm_epsilon", 1e-5);
  if (!(c.layer_norm_epsilon >= 0.0))
    j.fail("\"layer_norm_epsilon\" must be ≥ 0, got " + std::to_string(c.layer_norm_epsilon));
  c.apply_residual_connection_post_layernorm = j.get_bool("apply_residual_connection_post_layernorm", false);
  c.hidden_dropout = j.get_float("hidden_dropout", 0.0);
  c.attention_dropout = j.get_float("attention_dropout", 0.0);
  c.pretraining_tp = j.get_int("pretraining_tp", 1);
  if (c.pretraining_tp < 1) j.fail("\"pretraining_tp\" must be ≥ 1, got " + std::to_string(c.pretraining_tp));
  c.slow_but_exact = j.get_bool("slow_but_exact", false);
  c.tie_word_embeddings = j.get_bool("tie_word_embeddings", true);
  c.fused_qkv_blocks = j.get_bool("fused_qkv_blocks", false);
  return c;
}

// ---- ALiBi ------------------------------------------------------------------------------------------------------

std::vector<float> alibi_slopes(int64_t num_heads) {
  if (num_heads <= 0) throw Error("needs a positive number of heads, got " + std::to_string(num_heads), "alibi_slopes");
  // closest_power_of_2 = 2 ** floor(log2(H)), by integer arithmetic (exact for every H).
  int64_t p = 1;
  while (p * 2 <= num_heads) p *= 2;
  // base = 2 ** (-(2 ** -(log2(P) - 3))) in double, then stored as f32 (torch.full(..., dtype=float32)); the powers
  // base^i are taken on that f32 value.
  auto powers = [](int64_t closest, int64_t first, int64_t step, int64_t count, std::vector<float>& out) {
    const float base = static_cast<float>(std::exp2(-std::exp2(-(std::log2(static_cast<double>(closest)) - 3.0))));
    for (int64_t i = 0; i < count; ++i)
      out.push_back(static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(first + step * i))));
  };
  std::vector<float> slopes;
  slopes.reserve(static_cast<std::size_t>(num_heads));
  powers(p, 1, 1, p, slopes);
  // The remaining heads interleave between those slopes: odd powers of the next power of two's base.
  if (p != num_heads) powers(2 * p, 1, 2, std::min(p, num_heads - p), slopes);
  return slopes;
}

Tensor alibi_bias(const std::vector<float>& slopes, int64_t queries, int64_t keys) {
  const auto heads = static_cast<int64_t>(slopes.size());
  std::vector<float> bias(static_cast<std::size_t>(heads * queries * keys));
  float* out = bias.data();
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t t = 0; t < queries; ++t)
      for (int64_t s = 0; s < keys; ++s) *out++ = slopes[static_cast<std::size_t>(h)] * static_cast<float>(s);
  return Tensor::from_vector(bias, {heads, queries, keys});
}

// ---- modules ----------------------------------------------------------------------------------------------------

BloomAttention::BloomAttention(const BloomConfig& c, int64_t layer_idx, DType dtype)
    : layer_idx_(layer_idx),
      num_heads_(c.n_head),
      head_dim_(c.head_dim()),
      inv_norm_factor_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim())))),
      slopes_(alibi_slopes(c.n_head)),
      fused_qkv_blocks_(c.fused_qkv_blocks) {
  query_key_value = register_module("query_key_value",
                                    std::make_shared<nn::Linear>(c.hidden_size, 3 * c.hidden_size, true, dtype));
  dense = register_module("dense", std::make_shared<nn::Linear>(c.hidden_size, c.hidden_size, true, dtype));
  attention_dropout = register_module("attention_dropout", std::make_shared<nn::Dropout>(c.attention_dropout));
}

// x: [T, C] -> [T, C]
nn::Value BloomAttention::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  const int64_t t = x.size(0), heads = num_heads_, d = head_dim_;
  // query_key_value's output [T, 3C] is [T, H, 3, D] (transformers' _reshape: view(..., H, 3, D)), or [T, 3, H, D]
  // in llama.cpp's files.
  const std::vector<Tensor> qkv = nn::split_fused_qkv((*query_key_value)(x), heads, d, fused_qkv_blocks_);
  const Tensor &q = qkv[0], &k = qkv[1], &v = qkv[2];
  // Each sequence's queries attend to its own cached keys, biased by those keys' positions in it.
  const Tensor o = cached_attention_with(
      args, type_name(), layer_idx_, q, k, v,
      [&](const Tensor& qs, const Tensor& keys, const Tensor& values, int64_t q_offset) {
        const Tensor bias = alibi_bias(slopes_, qs.size(0), keys.size(0)).to(qs.device());
        return ops::attention_with_bias(qs, keys, values, bias, q_offset, /*causal=*/true, inv_norm_factor_);
      });
  return (*dense)(o.reshape({t, heads * d}));
}

BloomMLP::BloomMLP(const BloomConfig& c, DType dtype) {
  dense_h_to_4h = register_module("dense_h_to_4h",
                                  std::make_shared<nn::Linear>(c.hidden_size, 4 * c.hidden_size, true, dtype));
  dense_4h_to_h = register_module("dense_4h_to_h",
                                  std::make_shared<nn::Linear>(4 * c.hidden_size, c.hidden_size, true, dtype));
}

// x: [T, C] -> [T, C]
nn::Value BloomMLP::forward(const nn::Args& args) {
  return (*dense_4h_to_h)(ops::gelu_tanh((*dense_h_to_4h)(args[0].tensor())));
}

BloomBlock::BloomBlock(const BloomConfig& c, int64_t layer_idx, DType dtype)
    : residual_post_layernorm_(c.apply_residual_connection_post_layernorm) {
  // transformers' registration order (the checkpoint's key order).
  input_layernorm = register_module("input_layernorm",
                                    std::make_shared<nn::LayerNorm>(c.hidden_size, c.layer_norm_epsilon, true, true,
                                                                    dtype));
  self_attention = register_module("self_attention", std::make_shared<BloomAttention>(c, layer_idx, dtype));
  post_attention_layernorm = register_module("post_attention_layernorm",
                                             std::make_shared<nn::LayerNorm>(c.hidden_size, c.layer_norm_epsilon, true,
                                                                             true, dtype));
  mlp = register_module("mlp", std::make_shared<BloomMLP>(c, dtype));
}

// x: [T, C] -> [T, C]; the named arguments go on to self_attention. Sums as transformers' dropout_add:
// residual + output.
nn::Value BloomBlock::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  const Tensor ln_1 = (*input_layernorm)(x);
  const Tensor attn = (*self_attention)(nn::Args({ln_1}, args.kwargs)).tensor();
  const Tensor h = ops::add(residual_post_layernorm_ ? ln_1 : x, attn);
  const Tensor ln_2 = (*post_attention_layernorm)(h);
  return ops::add(residual_post_layernorm_ ? ln_2 : h, (*mlp)(ln_2));
}

BloomModel::BloomModel(const BloomConfig& c, DType dtype) {
  word_embeddings = register_module("word_embeddings",
                                    std::make_shared<nn::Embedding>(c.vocab_size, c.hidden_size, dtype));
  word_embeddings_layernorm = register_module("word_embeddings_layernorm",
                                              std::make_shared<nn::LayerNorm>(c.hidden_size, c.layer_norm_epsilon, true,
                                                                              true, dtype));
  h = register_module("h", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.n_layer; ++i) h->push_back(std::make_shared<BloomBlock>(c, i, dtype));
  ln_f = register_module("ln_f",
                         std::make_shared<nn::LayerNorm>(c.hidden_size, c.layer_norm_epsilon, true, true, dtype));
}

// input_ids [T] -> Dict{last_hidden_state: f32 [T, C], past_key_values}
nn::Value BloomModel::forward(const nn::Args& args) {
  CausalLMInputs in = parse_causal_lm_inputs(args, static_cast<int64_t>(h->size()), type_name());
  Tensor hidden = (*word_embeddings_layernorm)((*word_embeddings)(in.input_ids));
  for (std::size_t i = 0; i < h->size(); ++i) {
    nn::Args layer_args{hidden};
    layer_args.with("past_key_values", in.cache);
    hidden = (*h)[i](std::move(layer_args)).tensor();
  }
  return nn::Dict{{"last_hidden_state", (*ln_f)(hidden)}, {"past_key_values", in.cache}};
}

namespace {

CausalLMInfo bloom_info(const BloomConfig& c) {
  CausalLMInfo i;
  i.architecture = "BloomForCausalLM";
  i.model_type = "bloom";
  i.block_class = "BloomBlock";
  i.base_model_prefix = "transformer";
  i.layers_prefix = "transformer.h";
  i.vocab_size = c.vocab_size;
  i.hidden_size = c.hidden_size;
  i.num_cached_layers = c.n_layer;
  i.num_attention_heads = i.num_key_value_heads = c.n_head;
  i.head_dim = c.head_dim();
  i.max_position_embeddings = 0;  // ALiBi: no table of positions, no trained length to stop at
  i.tie_word_embeddings = c.tie_word_embeddings;
  return i;
}

}  // namespace

BloomForCausalLM::BloomForCausalLM(const BloomConfig& c, DType dtype) : CausalLM(bloom_info(c)), config_(c) {
  transformer = register_module("transformer", std::make_shared<BloomModel>(c, dtype));
  lm_head = register_lm_head(*this, *transformer->word_embeddings, c.hidden_size, c.vocab_size, c.tie_word_embeddings,
                             dtype);
}

// causal_lm.h's forward contract.
nn::Value BloomForCausalLM::forward(const nn::Args& args) {
  return forward_through_head(*transformer, *lm_head, args, type_name());
}

std::shared_ptr<CausalLM> make_bloom(const ConfigJson& config, DType dtype) {
  return std::make_shared<BloomForCausalLM>(BloomConfig::from_json(config), dtype);
}

}  // namespace ferry::models
