// GPT-NeoX causal LM after transformers' modeling_gpt_neox.py (transformers 5.24).
//
// Where ferry differs from transformers, and why:
//  - Activations are f32 whatever the weights' dtype (see llama.cc).
//  - The head is the module embed_out, transformers 4's attribute and the key every GPT-NeoX checkpoint holds
//    ("embed_out.weight", which transformers 5's save_pretrained still writes). transformers 5 names the attribute
//    lm_head and renames the key on load (conversion_mapping.py); ferry keeps the checkpoint's name, so every load
//    path (resident, dispatched, disk weights served from the shards) finds it as it is. Device maps therefore say
//    "embed_out" where Accelerate under transformers 5 says "lm_head"; the plans are otherwise the same.
//  - query_key_value's per-head q | k | v blocks are split by copying (nn/split.h): views only slice the leading
//    dimension.
//  - rotary_emb's forward returns inv_freq [R/2] instead of transformers' (cos, sin) tables: ops::apply_rotary_
//    computes the same f32 angles positions[t] · inv_freq[i] on the fly. RoPE types are those nn/rotary.h implements
//    ("default", "linear", "llama3"); the others are refused by name.
//  - rotary_ndims = int(D · partial_rotary_factor) must be even and between 2 and D: transformers fails at the first
//    forward for an odd one, and runs 0 as "no rotary" (refused here: no GPT-NeoX checkpoint has it).
//  - attention_dropout and the dropouts are identities (inference); the modules are registered so the tree matches.
#include "ferry/models/gpt_neox.h"

#include <cmath>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/nn/activation.h"
#include "ferry/nn/split.h"
#include "ferry/ops/elementwise.h"
#include "ferry/ops/rotary.h"

namespace ferry::models {

// ---- config -----------------------------------------------------------------------------------------------------

namespace {

// The value of `key` when present and not null, else nullptr.
const nlohmann::json* non_null(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// GPTNeoXConfig.convert_rope_params_to_dict: rope_scaling (when not empty), else rope_parameters, else {}; then
// rope_theta defaults to rotary_emb_base (else 10000) and partial_rotary_factor to rotary_pct (else 0.25).
void read_rope(const ConfigJson& j, GPTNeoXConfig& c) {
  const nlohmann::json* scaling = non_null(j.json(), "rope_scaling");
  if (scaling != nullptr && scaling->is_object() && scaling->empty()) scaling = nullptr;  // Python: `{} or ...`
  const nlohmann::json* params = non_null(j.json(), "rope_parameters");
  const std::string rope_key = scaling != nullptr ? "rope_scaling" : "rope_parameters";
  nlohmann::json rope = scaling != nullptr ? *scaling : params != nullptr ? *params : nlohmann::json::object();
  if (!rope.is_object()) j.fail("\"" + rope_key + "\" must be an object, got " + rope.dump());
  if (non_null(rope, "rope_theta") == nullptr) rope["rope_theta"] = j.get_float("rotary_emb_base", 10000.0);

  // Read through a ConfigJson of its own so errors name the dict's keys ("rope_parameters.factor").
  nlohmann::json view = {{rope_key, rope}};
  if (const nlohmann::json* original = non_null(j.json(), "original_max_position_embeddings"))
    view["original_max_position_embeddings"] = *original;
  c.rope = ConfigJson::from_json(view, j.where()).rope_parameters(c.max_position_embeddings);

  std::string factor_key = "rotary_pct";
  if (non_null(rope, "partial_rotary_factor") != nullptr) {
    factor_key = rope_key + ".partial_rotary_factor";
    c.partial_rotary_factor = ConfigJson::from_json(rope, j.where() + ": " + rope_key)
                                  .get_float("partial_rotary_factor", c.partial_rotary_factor);
  } else {
    c.partial_rotary_factor = j.get_float("rotary_pct", 0.25);
  }
  const int64_t head = c.head_size();
  const double ndims = static_cast<double>(head) * c.partial_rotary_factor;  // Python: int(head_size * factor)
  c.rotary_ndims = std::isfinite(ndims) && ndims >= 0 && ndims <= static_cast<double>(head)
                       ? static_cast<int64_t>(ndims)
                       : -1;
  if (c.rotary_ndims < 2 || c.rotary_ndims % 2 != 0)
    j.fail(factor_key + " = " + nlohmann::json(c.partial_rotary_factor).dump() + " rotates " +
           (c.rotary_ndims < 0 ? std::string("no valid number of") : std::to_string(c.rotary_ndims)) +
           " dims of each head (int(head size " + std::to_string(head) + " · " + factor_key +
           ")), which must be even and between 2 and the head size");
  try {
    (void)nn::rope_inverse_frequencies(c.rotary_ndims, c.rope);  // unknown rope types, bad factors
  } catch (const Error& e) {
    j.fail(rope_key + ": " + e.problem(), e.hint());
  }
}

}  // namespace

GPTNeoXConfig GPTNeoXConfig::from_json(const ConfigJson& j) {
  GPTNeoXConfig c;
  c.vocab_size = j.require_int("vocab_size");
  c.hidden_size = j.require_int("hidden_size");
  c.num_hidden_layers = j.require_int("num_hidden_layers");
  c.num_attention_heads = j.require_int("num_attention_heads");
  c.intermediate_size = j.require_int("intermediate_size");
  c.max_position_embeddings = j.get_int("max_position_embeddings", 2048);
  for (auto [key, v] : {std::pair{"vocab_size", c.vocab_size},
                        {"hidden_size", c.hidden_size},
                        {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads},
                        {"intermediate_size", c.intermediate_size},
                        {"max_position_embeddings", c.max_position_embeddings}})
    if (v <= 0) j.fail("\"" + std::string(key) + "\" must be positive, got " + std::to_string(v));
  if (c.hidden_size % c.num_attention_heads != 0)
    j.fail("hidden_size (" + std::to_string(c.hidden_size) + ") must be a multiple of num_attention_heads (" +
           std::to_string(c.num_attention_heads) + ")");
  c.hidden_act = j.get_string("hidden_act", "gelu");
  try {
    nn::check_activation(c.hidden_act);
  } catch (const Error& e) {
    j.fail("hidden_act \"" + c.hidden_act + "\" is not supported", e.hint());
  }
  c.layer_norm_eps = j.get_float("layer_norm_eps", 1e-5);
  c.hidden_dropout = j.get_float("hidden_dropout", 0.0);
  c.attention_dropout = j.get_float("attention_dropout", 0.0);
  c.use_parallel_residual = j.get_bool("use_parallel_residual", true);
  c.attention_bias = j.get_bool("attention_bias", true);
  c.tie_word_embeddings = j.get_bool("tie_word_embeddings", false);
  c.fused_qkv_blocks = j.get_bool("fused_qkv_blocks", false);
  read_rope(j, c);
  return c;
}

// ---- modules ----------------------------------------------------------------------------------------------------

GPTNeoXAttention::GPTNeoXAttention(const GPTNeoXConfig& c, int64_t layer_idx, DType dtype)
    : layer_idx_(layer_idx),
      num_heads_(c.num_attention_heads),
      head_size_(c.head_size()),
      scaling_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_size())))),
      fused_qkv_blocks_(c.fused_qkv_blocks) {
  query_key_value = register_module("query_key_value", std::make_shared<nn::Linear>(c.hidden_size, 3 * c.hidden_size,
                                                                                    c.attention_bias, dtype));
  dense = register_module("dense", std::make_shared<nn::Linear>(c.hidden_size, c.hidden_size, c.attention_bias, dtype));
}

// x: [T, C] -> [T, C]
nn::Value GPTNeoXAttention::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  const Tensor& position_ids = required_tensor_kwarg(args, "position_ids", type_name());
  const Tensor& inv_freq = required_tensor_kwarg(args, "position_embeddings", type_name());
  const int64_t t = x.size(0), d = head_size_;

  // query_key_value's output [T, 3C] is [T, H, 3, D]: each head's q, k and v side by side (transformers' view to
  // [T, H, 3D] and chunk(3, dim=-1)); or [T, 3, H, D] for llama.cpp's files (fused_qkv_blocks).
  std::vector<Tensor> parts = nn::split_fused_qkv((*query_key_value)(x), num_heads_, d, fused_qkv_blocks_);
  Tensor &q = parts[0], &k = parts[1], &v = parts[2];
  // Only the first R = 2 · inv_freq.size dims of each head rotate, as (i, i + R/2) pairs (rotate_half).
  ops::apply_rotary_(q, position_ids, inv_freq, ops::RopeLayout::RotateHalf);
  ops::apply_rotary_(k, position_ids, inv_freq, ops::RopeLayout::RotateHalf);

  // Each sequence's queries attend to its own cached keys and values (one cache, or a KvCacheBatch).
  Tensor o = cached_attention(args, type_name(), layer_idx_, q, k, v, scaling_);
  return (*dense)(o.reshape({t, num_heads_ * d}));
}

GPTNeoXMLP::GPTNeoXMLP(const GPTNeoXConfig& c, DType dtype) : activation_(c.hidden_act) {
  dense_h_to_4h = register_module("dense_h_to_4h",
                                  std::make_shared<nn::Linear>(c.hidden_size, c.intermediate_size, true, dtype));
  dense_4h_to_h = register_module("dense_4h_to_h",
                                  std::make_shared<nn::Linear>(c.intermediate_size, c.hidden_size, true, dtype));
}

// x: [T, C] -> [T, C]
nn::Value GPTNeoXMLP::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  return (*dense_4h_to_h)(nn::activation(activation_, (*dense_h_to_4h)(x)));
}

GPTNeoXLayer::GPTNeoXLayer(const GPTNeoXConfig& c, int64_t layer_idx, DType dtype)
    : use_parallel_residual_(c.use_parallel_residual) {
  // transformers' registration order (the checkpoint's key order): both norms, both dropouts, attention, mlp.
  input_layernorm = register_module("input_layernorm", std::make_shared<nn::LayerNorm>(c.hidden_size, c.layer_norm_eps,
                                                                                       true, true, dtype));
  post_attention_layernorm = register_module("post_attention_layernorm",
                                             std::make_shared<nn::LayerNorm>(c.hidden_size, c.layer_norm_eps, true,
                                                                             true, dtype));
  post_attention_dropout = register_module("post_attention_dropout", std::make_shared<nn::Dropout>(c.hidden_dropout));
  post_mlp_dropout = register_module("post_mlp_dropout", std::make_shared<nn::Dropout>(c.hidden_dropout));
  attention = register_module("attention", std::make_shared<GPTNeoXAttention>(c, layer_idx, dtype));
  mlp = register_module("mlp", std::make_shared<GPTNeoXMLP>(c, dtype));
}

// x: [T, C] -> [T, C]; the named arguments go on to attention. Sums in transformers' order.
nn::Value GPTNeoXLayer::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  Tensor attn_output = (*post_attention_dropout)((*attention)(nn::Args({(*input_layernorm)(x)}, args.kwargs)).tensor());
  if (use_parallel_residual_) {
    // x + attn(ln_1(x)) + mlp(ln_2(x)), summed as (mlp + attn) + x
    Tensor mlp_output = (*post_mlp_dropout)((*mlp)((*post_attention_layernorm)(x)));
    Tensor out = ops::add(mlp_output, attn_output);
    ops::add_(out, x);
    return out;
  }
  // h = attn(ln_1(x)) + x; out = mlp(ln_2(h)) + h
  Tensor h = ops::add(attn_output, x);
  Tensor mlp_output = (*post_mlp_dropout)((*mlp)((*post_attention_layernorm)(h)));
  return ops::add(mlp_output, h);
}

GPTNeoXModel::GPTNeoXModel(const GPTNeoXConfig& c, DType dtype) {
  embed_in = register_module("embed_in", std::make_shared<nn::Embedding>(c.vocab_size, c.hidden_size, dtype));
  emb_dropout = register_module("emb_dropout", std::make_shared<nn::Dropout>(c.hidden_dropout));
  layers = register_module("layers", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(std::make_shared<GPTNeoXLayer>(c, i, dtype));
  final_layer_norm = register_module("final_layer_norm",
                                     std::make_shared<nn::LayerNorm>(c.hidden_size, c.layer_norm_eps, true, true,
                                                                     dtype));
  // inv_freq and original_inv_freq over the R rotary dims, as GPTNeoXRotaryEmbedding.
  rotary_emb = register_module("rotary_emb",
                               std::make_shared<nn::RotaryEmbedding>("GPTNeoXRotaryEmbedding", c.rotary_ndims, c.rope));
}

// input_ids [T] -> Dict{last_hidden_state: f32 [T, C], past_key_values}
nn::Value GPTNeoXModel::forward(const nn::Args& args) {
  CausalLMInputs in = parse_causal_lm_inputs(args, static_cast<int64_t>(layers->size()), type_name());
  Tensor hidden = (*emb_dropout)((*embed_in)(in.input_ids));
  Tensor inv_freq = (*rotary_emb)(nn::Args{}).tensor();
  for (std::size_t i = 0; i < layers->size(); ++i) {
    nn::Args layer_args{hidden};
    layer_args.with("position_ids", in.position_ids)
        .with("past_key_values", in.cache)
        .with("position_embeddings", inv_freq);
    hidden = (*layers)[i](std::move(layer_args)).tensor();
  }
  return nn::Dict{{"last_hidden_state", (*final_layer_norm)(hidden)}, {"past_key_values", in.cache}};
}

namespace {

CausalLMInfo gpt_neox_info(const GPTNeoXConfig& c) {
  CausalLMInfo i;
  i.architecture = "GPTNeoXForCausalLM";
  i.model_type = "gpt_neox";
  i.block_class = "GPTNeoXLayer";
  i.base_model_prefix = "gpt_neox";
  i.layers_prefix = "gpt_neox.layers";
  i.vocab_size = c.vocab_size;
  i.hidden_size = c.hidden_size;
  i.num_cached_layers = c.num_hidden_layers;
  i.num_attention_heads = i.num_key_value_heads = c.num_attention_heads;
  i.head_dim = c.head_size();
  i.max_position_embeddings = c.max_position_embeddings;
  i.tie_word_embeddings = c.tie_word_embeddings;
  return i;
}

}  // namespace

GPTNeoXForCausalLM::GPTNeoXForCausalLM(const GPTNeoXConfig& c, DType dtype) : CausalLM(gpt_neox_info(c)), config_(c) {
  gpt_neox = register_module("gpt_neox", std::make_shared<GPTNeoXModel>(c, dtype));
  embed_out = register_module("embed_out", std::make_shared<nn::Linear>(c.hidden_size, c.vocab_size, false, dtype));
  if (c.tie_word_embeddings) embed_out->register_parameter("weight", gpt_neox->embed_in->parameter_slot("weight"));
}

// causal_lm.h's forward contract.
nn::Value GPTNeoXForCausalLM::forward(const nn::Args& args) {
  return forward_through_head(*gpt_neox, *embed_out, args, type_name());
}

std::shared_ptr<CausalLM> make_gpt_neox(const ConfigJson& config, DType dtype) {
  return std::make_shared<GPTNeoXForCausalLM>(GPTNeoXConfig::from_json(config), dtype);
}

}  // namespace ferry::models
