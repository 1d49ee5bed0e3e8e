// Phi-3 causal LM after transformers' modeling_phi3.py and configuration_phi3.py (transformers 5.24); LongRoPE after
// modeling_rope_utils.py's _compute_longrope_parameters and longrope_frequency_update. What ferry does otherwise,
// and why, is in include/ferry/models/phi3.h.
#include "ferry/models/phi3.h"

#include <algorithm>
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

void require_positive(const ConfigJson& j, const std::string& key, int64_t v) {
  if (v <= 0) j.fail("\"" + key + "\" must be positive, got " + std::to_string(v));
}

// A longrope factor list: numbers, R/2 of them, each positive (they divide the frequencies).
std::vector<double> read_factors(const ConfigJson& j, const nlohmann::json& rope, const std::string& rope_key,
                                 const char* name, int64_t count) {
  const std::string key = rope_key + "." + name;
  const nlohmann::json* list = non_null(rope, name);
  if (list == nullptr) j.fail("\"" + key + "\" is missing: rope type \"longrope\" needs short_factor and long_factor");
  if (!list->is_array()) j.fail("\"" + key + "\" must be a list of numbers, got " + list->dump());
  if (static_cast<int64_t>(list->size()) != count)
    j.fail("\"" + key + "\" has " + std::to_string(list->size()) + " entries; it needs one per rotated pair (" +
           std::to_string(count) + " = rotary dims / 2)");
  std::vector<double> out;
  for (const auto& v : *list) {
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      j.fail("\"" + key + "\" must hold positive numbers, got " + v.dump());
    out.push_back(v.get<double>());
  }
  return out;
}

// Phi3Config.convert_rope_params_to_dict + standardize_rope_params + validate_rope, and the longrope attention
// factor of _compute_longrope_parameters.
void read_rope(const ConfigJson& j, Phi3Config& c) {
  const nlohmann::json* scaling = non_null(j.json(), "rope_scaling");
  if (scaling != nullptr && scaling->is_object() && scaling->empty()) scaling = nullptr;  // Python: `{} or ...`
  const nlohmann::json* params = non_null(j.json(), "rope_parameters");
  const std::string rope_key = scaling != nullptr ? "rope_scaling" : "rope_parameters";
  const nlohmann::json rope = scaling != nullptr ? *scaling : params != nullptr ? *params : nlohmann::json::object();
  if (!rope.is_object()) j.fail("\"" + rope_key + "\" must be an object, got " + rope.dump());
  const ConfigJson dict = ConfigJson::from_json(rope, j.where() + ": " + rope_key);  // errors name the dict's keys

  c.rope_theta = dict.get_float("rope_theta", j.get_float("rope_theta", 10000.0));
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta))
    j.fail("rope_theta must be a positive number, got " + nlohmann::json(c.rope_theta).dump());
  const bool factor_in_dict = dict.has("partial_rotary_factor");
  c.partial_rotary_factor = dict.get_float("partial_rotary_factor", j.get_float("partial_rotary_factor", 1.0));
  const std::string factor_key = factor_in_dict ? rope_key + ".partial_rotary_factor" : "partial_rotary_factor";
  const double ndims = static_cast<double>(c.head_dim) * c.partial_rotary_factor;  // Python: int(head_dim * factor)
  c.rotary_ndims = std::isfinite(ndims) && ndims >= 0 && ndims <= static_cast<double>(c.head_dim)
                       ? static_cast<int64_t>(ndims)
                       : -1;
  if (c.rotary_ndims < 2 || c.rotary_ndims % 2 != 0)
    j.fail(factor_key + " = " + nlohmann::json(c.partial_rotary_factor).dump() + " rotates " +
           (c.rotary_ndims < 0 ? std::string("no valid number of") : std::to_string(c.rotary_ndims)) +
           " dims of each head (int(head_dim " + std::to_string(c.head_dim) + " · " + factor_key +
           ")), which must be even and between 2 and head_dim");

  const std::string type = dict.get_string("rope_type", dict.get_string("type", "default"));
  if (type == "default") return;
  if (type != "longrope" && type != "su" && type != "yarn")
    j.fail(rope_key + ": rope type \"" + type + "\" is not supported by Phi3ForCausalLM",
           "transformers' Phi3Config accepts \"default\" and \"longrope\" (\"su\" and \"yarn\" mean \"longrope\").");
  c.rope_type = "longrope";
  // standardize_rope_params sets the top-level key over the dict's for "longrope"; "su" and "yarn" are renamed only
  // after it ran, so they keep the dict's, which they must have.
  if (type == "longrope") {
    c.original_max_position_embeddings = j.get_int("original_max_position_embeddings", 4096);
    require_positive(j, "original_max_position_embeddings", c.original_max_position_embeddings);
  } else {
    if (!dict.has("original_max_position_embeddings"))
      j.fail("\"" + rope_key + "\" of type \"" + type + "\" needs \"original_max_position_embeddings\"");
    c.original_max_position_embeddings = dict.get_int("original_max_position_embeddings", 0);
    require_positive(j, rope_key + ".original_max_position_embeddings", c.original_max_position_embeddings);
  }
  c.short_factor = read_factors(j, rope, rope_key, "short_factor", c.rotary_ndims / 2);
  c.long_factor = read_factors(j, rope, rope_key, "long_factor", c.rotary_ndims / 2);

  // factor: the dict's, else max_position_embeddings / original; attention_factor: the dict's, else the paper's.
  const double original = static_cast<double>(c.original_max_position_embeddings);
  const double factor = dict.get_float("factor", static_cast<double>(c.max_position_embeddings) / original);
  c.attention_scaling = dict.get_float("attention_factor",
                                       factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(original)));
  if (!(c.attention_scaling >= 0) || !std::isfinite(c.attention_scaling))
    j.fail(rope_key + ".attention_factor must be a number ≥ 0, got " + nlohmann::json(c.attention_scaling).dump());
}

}  // namespace

Phi3Config Phi3Config::from_json(const ConfigJson& j) {
  Phi3Config c;
  c.vocab_size = j.require_int("vocab_size");
  c.hidden_size = j.require_int("hidden_size");
  c.intermediate_size = j.require_int("intermediate_size");
  c.num_hidden_layers = j.require_int("num_hidden_layers");
  c.num_attention_heads = j.require_int("num_attention_heads");
  c.num_key_value_heads = j.get_int("num_key_value_heads", c.num_attention_heads);
  c.max_position_embeddings = j.get_int("max_position_embeddings", 4096);
  for (auto [key, v] : {std::pair{"vocab_size", c.vocab_size},
                        {"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size},
                        {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads},
                        {"num_key_value_heads", c.num_key_value_heads},
                        {"max_position_embeddings", c.max_position_embeddings}})
    require_positive(j, key, v);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    j.fail("num_attention_heads (" + std::to_string(c.num_attention_heads) +
           ") must be a multiple of num_key_value_heads (" + std::to_string(c.num_key_value_heads) + ")");
  c.head_dim = j.get_int("head_dim", c.hidden_size / c.num_attention_heads);
  require_positive(j, "head_dim", c.head_dim);
  c.hidden_act = j.get_string("hidden_act", "silu");
  try {
    nn::check_activation(c.hidden_act);
  } catch (const Error& e) {
    j.fail("hidden_act \"" + c.hidden_act + "\" is not supported", e.hint());
  }
  c.rms_norm_eps = j.get_float("rms_norm_eps", 1e-5);
  c.resid_pdrop = j.get_float("resid_pdrop", 0.0);
  c.tie_word_embeddings = j.get_bool("tie_word_embeddings", false);
  if (const std::optional<int64_t> w = j.get_optional_int("sliding_window")) {
    require_positive(j, "sliding_window", *w);
    c.sliding_window = *w;
  }
  read_rope(j, c);
  return c;
}

// ---- rotary embedding -------------------------------------------------------------------------------------------

Tensor phi3_inverse_frequencies(const Phi3Config& c, const std::vector<double>& factors) {
  if (factors.empty()) return ops::rope_inv_freq(c.rotary_ndims, c.rope_theta);  // 1 / θ^(2i/R)
  // _compute_longrope_parameters: 1 / (ext_factors · base^(arange(0, R, 2) / R)), all f32.
  const float base = static_cast<float>(c.rope_theta), dim = static_cast<float>(c.rotary_ndims);
  std::vector<float> inv(factors.size());
  for (std::size_t i = 0; i < inv.size(); ++i)
    inv[i] = 1.0f / (static_cast<float>(factors[i]) * std::pow(base, static_cast<float>(2 * i) / dim));
  return Tensor::from_vector(inv, {static_cast<int64_t>(inv.size())});
}

Phi3RotaryEmbedding::Phi3RotaryEmbedding(const Phi3Config& c)
    : longrope_(c.rope_type == "longrope"), original_max_position_embeddings_(c.original_max_position_embeddings) {
  // Computed, never read from a checkpoint: non-persistent, as transformers' nn.Buffer(persistent=False).
  Tensor inv_freq = phi3_inverse_frequencies(c, c.short_factor);
  register_buffer("inv_freq", inv_freq, /*persistent=*/false);
  register_buffer("original_inv_freq", inv_freq.clone(), /*persistent=*/false);
  if (longrope_) long_inv_freq_ = phi3_inverse_frequencies(c, c.long_factor);
}

// position_ids i64 [T] -> inv_freq [R/2]: longrope_frequency_update's choice, the long factors once
// max(position_ids) + 1 passes the original length.
nn::Value Phi3RotaryEmbedding::forward(const nn::Args& args) {
  const Tensor& inv_freq = buffer("inv_freq");
  if (!longrope_) return inv_freq;
  const Tensor& position_ids = required_tensor_kwarg(args, "position_ids", type_name());
  if (position_ids.dtype() != DType::I64)
    throw Error("position_ids must be i64, got " + position_ids.str(), type_name());
  const Tensor host = position_ids.device() == Device::cpu() ? position_ids : position_ids.to(Device::cpu());
  int64_t seq_len = 0;
  for (const int64_t p : host.to_vector<int64_t>()) seq_len = std::max(seq_len, p + 1);
  if (seq_len <= original_max_position_embeddings_) return inv_freq;
  return long_inv_freq_.device() == inv_freq.device() ? long_inv_freq_ : long_inv_freq_.to(inv_freq.device());
}

// ---- modules ----------------------------------------------------------------------------------------------------

Phi3Attention::Phi3Attention(const Phi3Config& c, int64_t layer_idx, DType dtype)
    : layer_idx_(layer_idx),
      num_heads_(c.num_attention_heads),
      num_key_value_heads_(c.num_key_value_heads),
      head_dim_(c.head_dim),
      sliding_window_(c.sliding_window),
      scaling_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)))),
      rope_scaling_(static_cast<float>(c.attention_scaling)) {
  const int64_t q_out = num_heads_ * head_dim_, kv_out = num_key_value_heads_ * head_dim_;
  // transformers' order: o_proj is registered first.
  o_proj = register_module("o_proj", std::make_shared<nn::Linear>(q_out, c.hidden_size, false, dtype));
  qkv_proj = register_module("qkv_proj", std::make_shared<nn::Linear>(c.hidden_size, q_out + 2 * kv_out, false, dtype));
}

// x: [T, C] -> [T, C]
nn::Value Phi3Attention::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  const Tensor& position_ids = required_tensor_kwarg(args, "position_ids", type_name());
  const Tensor& inv_freq = required_tensor_kwarg(args, "position_embeddings", type_name());
  const int64_t t = x.size(0), q_out = num_heads_ * head_dim_, kv_out = num_key_value_heads_ * head_dim_;

  // qkv_proj's output [T, Hq·D + 2·Hkv·D] is q | k | v.
  std::vector<Tensor> qkv = nn::split_last_dim((*qkv_proj)(x), {q_out, kv_out, kv_out});
  Tensor q = qkv[0].reshape({t, num_heads_, head_dim_});
  Tensor k = qkv[1].reshape({t, num_key_value_heads_, head_dim_});
  Tensor v = qkv[2].reshape({t, num_key_value_heads_, head_dim_});
  // The first R = 2 · inv_freq.size dims of each head rotate, as (i, i + R/2) pairs; cos and sin scaled by the
  // longrope attention factor (1 otherwise).
  ops::apply_rotary_(q, position_ids, inv_freq, ops::RopeLayout::RotateHalf, rope_scaling_);
  ops::apply_rotary_(k, position_ids, inv_freq, ops::RopeLayout::RotateHalf, rope_scaling_);

  // Each sequence's queries attend to its own cached keys and values (one cache, or a KvCacheBatch).
  Tensor o = cached_attention(args, type_name(), layer_idx_, q, k, v, scaling_, sliding_window_);
  return (*o_proj)(o.reshape({t, q_out}));
}

Phi3MLP::Phi3MLP(const Phi3Config& c, DType dtype)
    : intermediate_size_(c.intermediate_size), activation_(c.hidden_act) {
  gate_up_proj = register_module("gate_up_proj",
                                 std::make_shared<nn::Linear>(c.hidden_size, 2 * c.intermediate_size, false, dtype));
  down_proj = register_module("down_proj",
                              std::make_shared<nn::Linear>(c.intermediate_size, c.hidden_size, false, dtype));
}

// x: [T, C] -> [T, C]
nn::Value Phi3MLP::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  std::vector<Tensor> gate_up = nn::split_last_dim((*gate_up_proj)(x), {intermediate_size_, intermediate_size_});
  const Tensor& gate = gate_up[0];
  const Tensor& up = gate_up[1];
  const bool silu = activation_ == "silu" || activation_ == "swish";
  return (*down_proj)(silu ? ops::silu_mul(gate, up) : ops::mul(up, nn::activation(activation_, gate)));
}

Phi3DecoderLayer::Phi3DecoderLayer(const Phi3Config& c, int64_t layer_idx, DType dtype) {
  // transformers' registration order (the checkpoint's key order).
  self_attn = register_module("self_attn", std::make_shared<Phi3Attention>(c, layer_idx, dtype));
  mlp = register_module("mlp", std::make_shared<Phi3MLP>(c, dtype));
  input_layernorm = register_module("input_layernorm",
                                    std::make_shared<Phi3RMSNorm>(c.hidden_size, c.rms_norm_eps, dtype));
  post_attention_layernorm = register_module("post_attention_layernorm",
                                             std::make_shared<Phi3RMSNorm>(c.hidden_size, c.rms_norm_eps, dtype));
  resid_attn_dropout = register_module("resid_attn_dropout", std::make_shared<nn::Dropout>(c.resid_pdrop));
  resid_mlp_dropout = register_module("resid_mlp_dropout", std::make_shared<nn::Dropout>(c.resid_pdrop));
}

// x: [T, C] -> [T, C]; the named arguments go on to self_attn.
nn::Value Phi3DecoderLayer::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  Tensor h = ops::add(x, (*resid_attn_dropout)((*self_attn)(nn::Args({(*input_layernorm)(x)}, args.kwargs)).tensor()));
  ops::add_(h, (*resid_mlp_dropout)((*mlp)((*post_attention_layernorm)(h))));
  return h;
}

Phi3Model::Phi3Model(const Phi3Config& c, DType dtype) {
  embed_tokens = register_module("embed_tokens", std::make_shared<nn::Embedding>(c.vocab_size, c.hidden_size, dtype));
  layers = register_module("layers", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(std::make_shared<Phi3DecoderLayer>(c, i, dtype));
  norm = register_module("norm", std::make_shared<Phi3RMSNorm>(c.hidden_size, c.rms_norm_eps, dtype));
  rotary_emb = register_module("rotary_emb", std::make_shared<Phi3RotaryEmbedding>(c));
}

// input_ids [T] -> Dict{last_hidden_state: f32 [T, C], past_key_values}
nn::Value Phi3Model::forward(const nn::Args& args) {
  CausalLMInputs in = parse_causal_lm_inputs(args, static_cast<int64_t>(layers->size()), type_name());
  Tensor hidden = (*embed_tokens)(in.input_ids);
  Tensor inv_freq = (*rotary_emb)(nn::Args{}.with("position_ids", in.position_ids)).tensor();
  for (std::size_t i = 0; i < layers->size(); ++i) {
    nn::Args layer_args{hidden};
    layer_args.with("position_ids", in.position_ids)
        .with("past_key_values", in.cache)
        .with("position_embeddings", inv_freq);
    hidden = (*layers)[i](std::move(layer_args)).tensor();
  }
  return nn::Dict{{"last_hidden_state", (*norm)(hidden)}, {"past_key_values", in.cache}};
}

namespace {

CausalLMInfo phi3_info(const Phi3Config& c) {
  return model_layers_info("Phi3ForCausalLM", "phi3", "Phi3DecoderLayer",
                           {c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
                            c.num_key_value_heads, c.head_dim, c.max_position_embeddings, c.tie_word_embeddings});
}

}  // namespace

Phi3ForCausalLM::Phi3ForCausalLM(const Phi3Config& c, DType dtype) : CausalLM(phi3_info(c)), config_(c) {
  model = register_module("model", std::make_shared<Phi3Model>(c, dtype));
  lm_head = register_lm_head(*this, *model->embed_tokens, c.hidden_size, c.vocab_size, c.tie_word_embeddings, dtype);
}

// causal_lm.h's forward contract.
nn::Value Phi3ForCausalLM::forward(const nn::Args& args) {
  return forward_through_head(*model, *lm_head, args, type_name());
}

std::shared_ptr<CausalLM> make_phi3(const ConfigJson& config, DType dtype) {
  return std::make_shared<Phi3ForCausalLM>(Phi3Config::from_json(config), dtype);
}

}  // namespace ferry::models
