// Gemma 2 and Gemma 3 (text) causal LMs after transformers' modeling_gemma2.py / configuration_gemma2.py and
// modeling_gemma3.py / configuration_gemma3.py (transformers 5.24). What ferry does otherwise, and why, is in
// include/ferry/models/gemma.h.
#include "ferry/models/gemma.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/nn/activation.h"
#include "ferry/ops/elementwise.h"
#include "ferry/ops/norm.h"
#include "ferry/ops/rotary.h"

namespace ferry::models {

// ---- config -----------------------------------------------------------------------------------------------------

namespace {

constexpr const char* kSliding = "sliding_attention";
constexpr const char* kFull = "full_attention";

void require_positive(const ConfigJson& j, const std::string& key, int64_t v) {
  if (v <= 0) j.fail("\"" + key + "\" must be positive, got " + std::to_string(v));
}

// A soft-capping key: its value (> 0); `fallback` when absent (0: none); 0 when null.
double read_softcap(const ConfigJson& j, const char* key, double fallback) {
  if (!j.json().contains(key)) return fallback;
  if (j.json()[key].is_null()) return 0;
  const double cap = j.get_float(key, 0);
  if (!(cap > 0) || !std::isfinite(cap))
    j.fail("\"" + std::string(key) + "\" must be a positive number or null, got " + nlohmann::json(cap).dump());
  return cap;
}

// layer_types when given (one "sliding_attention" / "full_attention" per layer), else sliding unless
// (i + 1) % pattern == 0 (Gemma2Config: pattern 2; Gemma3TextConfig: sliding_window_pattern, default 6).
std::vector<bool> read_layer_types(const ConfigJson& j, int64_t layers, int64_t pattern) {
  std::vector<bool> sliding(static_cast<std::size_t>(layers));
  const auto it = j.json().find("layer_types");
  if (it == j.json().end() || it->is_null()) {
    for (int64_t i = 0; i < layers; ++i) sliding[static_cast<std::size_t>(i)] = (i + 1) % pattern != 0;
    return sliding;
  }
  if (!it->is_array() || static_cast<int64_t>(it->size()) != layers)
    j.fail("\"layer_types\" must list one type per layer (" + std::to_string(layers) + "), got " + it->dump());
  for (std::size_t i = 0; i < sliding.size(); ++i) {
    const auto& t = (*it)[i];
    if (!t.is_string() || (t != kSliding && t != kFull))
      j.fail("\"layer_types\"[" + std::to_string(i) + "] must be \"full_attention\" or \"sliding_attention\", got " +
             t.dump());
    sliding[i] = t == kSliding;
  }
  return sliding;
}

// The keys both generations share, with `c`'s defaults (set by the caller: transformers' class defaults, which
// released Gemma 3 configs rely on — google/gemma-3-4b-it's text_config has no vocab_size or num_attention_heads).
void read_shared_keys(const ConfigJson& j, GemmaConfig& c, int64_t default_pattern) {
  c.vocab_size = j.get_int("vocab_size", c.vocab_size);
  c.hidden_size = j.get_int("hidden_size", c.hidden_size);
  c.intermediate_size = j.get_int("intermediate_size", c.intermediate_size);
  c.num_hidden_layers = j.get_int("num_hidden_layers", c.num_hidden_layers);
  c.num_attention_heads = j.get_int("num_attention_heads", c.num_attention_heads);
  c.num_key_value_heads = j.get_int("num_key_value_heads", c.num_key_value_heads);
  c.head_dim = j.get_int("head_dim", c.head_dim);
  c.max_position_embeddings = j.get_int("max_position_embeddings", c.max_position_embeddings);
  for (auto [key, v] : {std::pair{"vocab_size", c.vocab_size},
                        {"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size},
                        {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads},
                        {"num_key_value_heads", c.num_key_value_heads},
                        {"head_dim", c.head_dim},
                        {"max_position_embeddings", c.max_position_embeddings}})
    require_positive(j, key, v);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    j.fail("num_attention_heads (" + std::to_string(c.num_attention_heads) +
           ") must be a multiple of num_key_value_heads (" + std::to_string(c.num_key_value_heads) + ")");
  if (c.head_dim % 2 != 0) j.fail("head_dim " + std::to_string(c.head_dim) + " must be even for rotary embeddings");
  // hidden_activation is what Gemma2MLP / Gemma3MLP read; released configs also carry hidden_act, which they ignore.
  c.hidden_activation = j.get_string("hidden_activation", "gelu_pytorch_tanh");
  try {
    nn::check_activation(c.hidden_activation);
  } catch (const Error& e) {
    j.fail("hidden_activation \"" + c.hidden_activation + "\" is not supported", e.hint());
  }
  c.rms_norm_eps = j.get_float("rms_norm_eps", 1e-6);
  c.norm_weights_include_one = j.get_bool("norm_weights_include_one", false);
  c.tie_word_embeddings = j.get_bool("tie_word_embeddings", true);
  c.attention_bias = j.get_bool("attention_bias", false);
  c.query_pre_attn_scalar = j.get_float("query_pre_attn_scalar", 256.0);
  if (!(c.query_pre_attn_scalar > 0) || !std::isfinite(c.query_pre_attn_scalar))
    j.fail("\"query_pre_attn_scalar\" must be positive, got " + nlohmann::json(c.query_pre_attn_scalar).dump());
  if (j.get_bool("use_bidirectional_attention", false))
    j.fail("use_bidirectional_attention is not supported by ferry's " + c.architecture,
           "ferry runs Gemma as a causal language model; bidirectional (embedding) variants need an encoder.");
  const auto w = j.json().find("sliding_window");
  if (w != j.json().end() && w->is_null()) {
    c.sliding_window = 0;
  } else {
    c.sliding_window = j.get_int("sliding_window", 4096);
    require_positive(j, "sliding_window", c.sliding_window);
  }
  c.sliding_layers = read_layer_types(j, c.num_hidden_layers, default_pattern);
}

// One layer type's RoPE from its rope_parameters dict (`dict`, may be null) and the legacy fallback theta, read by
// ConfigJson::rope_parameters so that its checks and messages are the shared ones.
nn::RopeParameters read_layer_rope(const ConfigJson& j, const GemmaConfig& c, const std::string& type,
                                   const nlohmann::json& dict, double theta) {
  if (!dict.is_null() && !dict.is_object())
    j.fail("\"rope_parameters." + type + "\" must be an object, got " + dict.dump());
  nlohmann::json sub = dict.is_object() ? dict : nlohmann::json{{"rope_type", "default"}};
  if (!sub.contains("rope_theta") || sub["rope_theta"].is_null()) sub["rope_theta"] = theta;
  const ConfigJson view = ConfigJson::from_json(nlohmann::json{{"rope_parameters", sub}},
                                                j.where() + ": rope_parameters." + type);
  return view.rope_parameters(c.max_position_embeddings);
}

// Gemma3TextConfig.convert_rope_params_to_dict: rope_parameters per layer type, else the defaults; a legacy
// rope_scaling updates full_attention's; rope_theta (1e6) and rope_local_base_freq (1e4) fill in absent thetas.
void read_gemma3_rope(const ConfigJson& j, GemmaConfig& c) {
  nlohmann::json params = nlohmann::json::object();
  const auto it = j.json().find("rope_parameters");
  if (it != j.json().end() && !it->is_null()) {
    if (!it->is_object() || (!it->empty() && !it->contains(kFull) && !it->contains(kSliding)))
      j.fail(
          "\"rope_parameters\" must be given per layer type ({\"full_attention\": {...}, \"sliding_attention\": "
          "{...}}), got " +
              it->dump(),
          "Gemma 3 rotates its sliding and global layers with separate RoPE settings.");
    params = *it;
  }
  for (const char* type : {kFull, kSliding})
    if (params.contains(type) && !params[type].is_null() && !params[type].is_object())
      j.fail("\"rope_parameters." + std::string(type) + "\" must be an object, got " + params[type].dump());
  nlohmann::json full = params.contains(kFull) && !params[kFull].is_null() ? params[kFull] : nlohmann::json::object();
  const auto scaling = j.json().find("rope_scaling");
  if (scaling != j.json().end() && !scaling->is_null()) {
    if (!scaling->is_object()) j.fail("\"rope_scaling\" must be an object, got " + scaling->dump());
    full.update(*scaling);
  }
  if (!full.contains("rope_type") && !full.contains("type")) full["rope_type"] = "default";
  const nlohmann::json sliding = params.contains(kSliding) ? params[kSliding] : nlohmann::json();
  c.rope_global = read_layer_rope(j, c, kFull, full, j.get_float("rope_theta", 1'000'000.0));
  c.rope_local = read_layer_rope(j, c, kSliding, sliding, j.get_float("rope_local_base_freq", 10'000.0));
}

}  // namespace

GemmaConfig GemmaConfig::gemma2_from_json(const ConfigJson& j) {
  GemmaConfig c;  // the defaults are Gemma2Config's
  read_shared_keys(j, c, /*default_pattern=*/2);
  c.attn_logit_softcapping = read_softcap(j, "attn_logit_softcapping", 50.0);
  c.final_logit_softcapping = read_softcap(j, "final_logit_softcapping", 30.0);
  c.rope_global = c.rope_local = j.rope_parameters(c.max_position_embeddings, 10000.0);
  return c;
}

GemmaConfig GemmaConfig::gemma3_from_json(const ConfigJson& j) {
  GemmaConfig c;
  c.vocab_size = 262208;
  c.architecture = "Gemma3ForCausalLM";
  c.class_prefix = "Gemma3";
  c.model_type = "gemma3_text";
  c.base_model_class = "Gemma3TextModel";
  c.max_position_embeddings = 131072;
  c.qk_norm = true;
  c.rope_per_layer_type = true;
  const int64_t pattern = j.get_int("sliding_window_pattern", 6);
  require_positive(j, "sliding_window_pattern", pattern);
  read_shared_keys(j, c, pattern);
  if (read_softcap(j, "attn_logit_softcapping", 0) > 0)
    log_warning(
        "{}: attn_logit_softcapping is set, but Gemma 3 does not apply it (transformers' Gemma3Attention "
        "ignores it); ferry ignores it too",
        j.where());
  c.final_logit_softcapping = read_softcap(j, "final_logit_softcapping", 0);
  read_gemma3_rope(j, c);
  return c;
}

// ---- shared modules ---------------------------------------------------------------------------------------------

GemmaRMSNorm::GemmaRMSNorm(std::string class_prefix, int64_t dim, double eps, DType dtype, bool weight_includes_one)
    : nn::RMSNorm(dim, eps, dtype), prefix_(std::move(class_prefix)), weight_includes_one_(weight_includes_one) {}

// x [..., D] -> x / √(mean(x²) + eps) · (1 + w): transformers' output * (1.0 + self.weight.float()), in f32.
nn::Value GemmaRMSNorm::forward(const nn::Args& args) {
  const Tensor& w = weight();
  if (weight_includes_one_) return ops::rms_norm(args[0].tensor(), w, static_cast<float>(eps()));
  if (!ones_.defined() || ones_.device() != w.device())
    ones_ = Tensor::full({hidden_size()}, 1.0, DType::F32, w.device());
  const Tensor one_plus_w = ops::add(w.dtype() == DType::F32 ? w : w.to(DType::F32), ones_);
  return ops::rms_norm(args[0].tensor(), one_plus_w, static_cast<float>(eps()));
}

namespace {

// √C as transformers multiplies by it: a scalar tensor cast to the weights' dtype (bf16: √3072 = 55.4256 → 55.5).
float rounded_embed_scale(int64_t hidden_size, DType dtype) {
  const double scale = std::sqrt(static_cast<double>(hidden_size));
  if (dtype != DType::F16 && dtype != DType::BF16) return static_cast<float>(scale);
  return Tensor::full({1}, scale, dtype).to(DType::F32).to_vector<float>()[0];
}

}  // namespace

GemmaScaledWordEmbedding::GemmaScaledWordEmbedding(std::string class_prefix, int64_t num_embeddings,
                                                   int64_t embedding_dim, DType dtype)
    : nn::Embedding(num_embeddings, embedding_dim, dtype),
      prefix_(std::move(class_prefix)),
      scale_(rounded_embed_scale(embedding_dim, dtype)) {
  // Non-persistent, as transformers' nn.Buffer(torch.tensor(embed_scale), persistent=False): never in a checkpoint,
  // but part of the module's size for device maps.
  const DType buffer_dtype = dtype == DType::F16 || dtype == DType::BF16 ? dtype : DType::F32;
  register_buffer("embed_scale", Tensor::full(Shape{}, scale_, buffer_dtype), /*persistent=*/false);
}

// ids [...] -> f32 [..., C] · embed_scale
nn::Value GemmaScaledWordEmbedding::forward(const nn::Args& args) {
  return ops::scale(nn::Embedding::forward(args).tensor(), scale_);
}

Gemma3RotaryEmbedding::Gemma3RotaryEmbedding(const GemmaConfig& c) {
  // sorted(set(config.layer_types)): "full_attention" < "sliding_attention".
  bool any_full = false, any_sliding = false;
  for (const bool s : c.sliding_layers) (s ? any_sliding : any_full) = true;
  if (any_full) layer_types_.push_back(kFull);
  if (any_sliding) layer_types_.push_back(kSliding);
  for (const std::string& type : layer_types_) {
    const Tensor inv_freq = nn::rope_inverse_frequencies(c.head_dim, type == kFull ? c.rope_global : c.rope_local);
    register_buffer(type + "_inv_freq", inv_freq, /*persistent=*/false);
    register_buffer(type + "_original_inv_freq", inv_freq.clone(), /*persistent=*/false);
  }
}

// -> Dict{"full_attention": inv_freq, "sliding_attention": inv_freq} (the types present)
nn::Value Gemma3RotaryEmbedding::forward(const nn::Args& /*args*/) {
  nn::Dict out;
  for (const std::string& type : layer_types_) out.set(type, buffer(type + "_inv_freq"));
  return out;
}

GemmaMLP::GemmaMLP(const GemmaConfig& c, DType dtype) : prefix_(c.class_prefix), activation_(c.hidden_activation) {
  gate_proj = register_module("gate_proj",
                              std::make_shared<nn::Linear>(c.hidden_size, c.intermediate_size, false, dtype));
  up_proj = register_module("up_proj", std::make_shared<nn::Linear>(c.hidden_size, c.intermediate_size, false, dtype));
  down_proj = register_module("down_proj",
                              std::make_shared<nn::Linear>(c.intermediate_size, c.hidden_size, false, dtype));
}

// x: [T, C] -> [T, C]
nn::Value GemmaMLP::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  return (*down_proj)(ops::mul(nn::activation(activation_, (*gate_proj)(x)), (*up_proj)(x)));
}

GemmaAttention::GemmaAttention(const GemmaConfig& c, int64_t layer_idx, DType dtype)
    : prefix_(c.class_prefix),
      layer_idx_(layer_idx),
      num_heads_(c.num_attention_heads),
      num_key_value_heads_(c.num_key_value_heads),
      head_dim_(c.head_dim),
      sliding_window_(c.sliding_layers[static_cast<std::size_t>(layer_idx)] ? c.sliding_window : 0),
      scaling_(static_cast<float>(std::pow(c.query_pre_attn_scalar, -0.5))),
      softcap_(static_cast<float>(c.attn_logit_softcapping)) {
  const int64_t q_out = num_heads_ * head_dim_, kv_out = num_key_value_heads_ * head_dim_;
  q_proj = register_module("q_proj", std::make_shared<nn::Linear>(c.hidden_size, q_out, c.attention_bias, dtype));
  k_proj = register_module("k_proj", std::make_shared<nn::Linear>(c.hidden_size, kv_out, c.attention_bias, dtype));
  v_proj = register_module("v_proj", std::make_shared<nn::Linear>(c.hidden_size, kv_out, c.attention_bias, dtype));
  o_proj = register_module("o_proj", std::make_shared<nn::Linear>(q_out, c.hidden_size, c.attention_bias, dtype));
  if (c.qk_norm) {
    q_norm = register_module("q_norm", std::make_shared<GemmaRMSNorm>(prefix_, head_dim_, c.rms_norm_eps, dtype,
                                                                      c.norm_weights_include_one));
    k_norm = register_module("k_norm", std::make_shared<GemmaRMSNorm>(prefix_, head_dim_, c.rms_norm_eps, dtype,
                                                                      c.norm_weights_include_one));
  }
}

// x: [T, C] -> [T, C]
nn::Value GemmaAttention::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  const Tensor& position_ids = required_tensor_kwarg(args, "position_ids", type_name());
  const Tensor& inv_freq = required_tensor_kwarg(args, "position_embeddings", type_name());
  const int64_t t = x.size(0);

  Tensor q = (*q_proj)(x).reshape({t, num_heads_, head_dim_});
  Tensor k = (*k_proj)(x).reshape({t, num_key_value_heads_, head_dim_});
  const Tensor v = (*v_proj)(x).reshape({t, num_key_value_heads_, head_dim_});
  if (q_norm) {  // Gemma 3: each head's query and key normalised over head_dim, before the rotation
    q = (*q_norm)(q);
    k = (*k_norm)(k);
  }
  ops::apply_rotary_(q, position_ids, inv_freq, ops::RopeLayout::RotateHalf);
  ops::apply_rotary_(k, position_ids, inv_freq, ops::RopeLayout::RotateHalf);

  // Scores scale · q·k, soft-capped (Gemma 2), within the layer's window; one cache or a KvCacheBatch.
  const Tensor o = cached_attention(args, type_name(), layer_idx_, q, k, v, scaling_, sliding_window_, softcap_);
  return (*o_proj)(o.reshape({t, num_heads_ * head_dim_}));
}

GemmaDecoderLayer::GemmaDecoderLayer(const GemmaConfig& c, int64_t layer_idx, DType dtype) : prefix_(c.class_prefix) {
  // transformers' registration order (the checkpoint's key order).
  self_attn = register_module("self_attn", std::make_shared<GemmaAttention>(c, layer_idx, dtype));
  mlp = register_module("mlp", std::make_shared<GemmaMLP>(c, dtype));
  auto norm = [&](const char* name) {
    return register_module(name, std::make_shared<GemmaRMSNorm>(prefix_, c.hidden_size, c.rms_norm_eps, dtype,
                                                                c.norm_weights_include_one));
  };
  input_layernorm = norm("input_layernorm");
  post_attention_layernorm = norm("post_attention_layernorm");
  pre_feedforward_layernorm = norm("pre_feedforward_layernorm");
  post_feedforward_layernorm = norm("post_feedforward_layernorm");
}

// x: [T, C] -> [T, C]; the named arguments go on to self_attn.
nn::Value GemmaDecoderLayer::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  const Tensor attn = (*self_attn)(nn::Args({(*input_layernorm)(x)}, args.kwargs)).tensor();
  Tensor h = ops::add(x, (*post_attention_layernorm)(attn));
  ops::add_(h, (*post_feedforward_layernorm)((*mlp)((*pre_feedforward_layernorm)(h))));
  return h;
}

GemmaModel::GemmaModel(const GemmaConfig& c, DType dtype)
    : class_name_(c.base_model_class), sliding_layers_(c.sliding_layers) {
  embed_tokens = register_module("embed_tokens",
                                 std::make_shared<GemmaScaledWordEmbedding>(c.class_prefix, c.vocab_size, c.hidden_size,
                                                                            dtype));
  layers = register_module("layers", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(std::make_shared<GemmaDecoderLayer>(c, i, dtype));
  norm = register_module("norm", std::make_shared<GemmaRMSNorm>(c.class_prefix, c.hidden_size, c.rms_norm_eps, dtype,
                                                                c.norm_weights_include_one));
  if (c.rope_per_layer_type) rotary_emb = register_module("rotary_emb", std::make_shared<Gemma3RotaryEmbedding>(c));
  else
    rotary_emb = register_module("rotary_emb", std::make_shared<nn::RotaryEmbedding>(c.class_prefix + "RotaryEmbedding",
                                                                                     c.head_dim, c.rope_global));
}

// input_ids [T] -> Dict{last_hidden_state: f32 [T, C], past_key_values}
nn::Value GemmaModel::forward(const nn::Args& args) {
  CausalLMInputs in = parse_causal_lm_inputs(args, static_cast<int64_t>(layers->size()), type_name());
  Tensor hidden = (*embed_tokens)(in.input_ids);
  // One table for every layer (Gemma 2), or one per layer type (Gemma 3).
  const nn::Value tables = (*rotary_emb)(nn::Args{});
  Tensor full, sliding;
  if (tables.is_tensor()) {
    full = sliding = tables.tensor();
  } else {
    if (const nn::Value* f = tables.dict().find(kFull)) full = f->tensor();
    if (const nn::Value* s = tables.dict().find(kSliding)) sliding = s->tensor();
  }
  for (std::size_t i = 0; i < layers->size(); ++i) {
    nn::Args layer_args{hidden};
    layer_args.with("position_ids", in.position_ids)
        .with("past_key_values", in.cache)
        .with("position_embeddings", sliding_layers_[i] ? sliding : full);
    hidden = (*layers)[i](std::move(layer_args)).tensor();
  }
  return nn::Dict{{"last_hidden_state", (*norm)(hidden)}, {"past_key_values", in.cache}};
}

namespace {

CausalLMInfo gemma_info(const GemmaConfig& c) {
  return model_layers_info(c.architecture, c.model_type, c.class_prefix + "DecoderLayer",
                           {c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
                            c.num_key_value_heads, c.head_dim, c.max_position_embeddings, c.tie_word_embeddings});
}

}  // namespace

GemmaForCausalLM::GemmaForCausalLM(const GemmaConfig& c, DType dtype) : CausalLM(gemma_info(c)), config_(c) {
  model = register_module("model", std::make_shared<GemmaModel>(c, dtype));
  lm_head = register_lm_head(*this, *model->embed_tokens, c.hidden_size, c.vocab_size, c.tie_word_embeddings, dtype);
}

// causal_lm.h's forward contract; the kept rows' logits soft-capped by final_logit_softcapping when set.
nn::Value GemmaForCausalLM::forward(const nn::Args& args) {
  nn::Value out = forward_through_head(*model, *lm_head, args, type_name());
  if (config_.final_logit_softcapping > 0) {
    Tensor& logits = out.dict().at("logits").tensor();
    logits = ops::softcap(logits, static_cast<float>(config_.final_logit_softcapping));
  }
  return out;
}

std::shared_ptr<CausalLM> make_gemma2(const ConfigJson& config, DType dtype) {
  return std::make_shared<GemmaForCausalLM>(GemmaConfig::gemma2_from_json(config), dtype);
}

std::shared_ptr<CausalLM> make_gemma3(const ConfigJson& config, DType dtype) {
  return std::make_shared<GemmaForCausalLM>(GemmaConfig::gemma3_from_json(config), dtype);
}

// ---- Gemma3ForConditionalGeneration, text only ------------------------------------------------------------------

namespace {

CausalLMInfo gemma3_conditional_info(const GemmaConfig& c) {
  CausalLMInfo i = gemma_info(c);
  i.architecture = "Gemma3ForConditionalGeneration";
  i.model_type = "gemma3";
  i.base_model_prefix = "language_model.model";
  i.layers_prefix = "language_model.model.layers";
  return i;
}

}  // namespace

Gemma3ForConditionalGeneration::Gemma3ForConditionalGeneration(const GemmaConfig& c, DType dtype)
    : CausalLM(gemma3_conditional_info(c)) {
  language_model = register_module("language_model", std::make_shared<GemmaForCausalLM>(c, dtype));
}

// causal_lm.h's forward contract: the language model's, through its operator() so that its hooks run.
nn::Value Gemma3ForConditionalGeneration::forward(const nn::Args& args) { return (*language_model)(args); }

std::shared_ptr<CausalLM> make_gemma3_conditional(const ConfigJson& config, DType dtype) {
  const auto text = config.json().find("text_config");
  if (text == config.json().end() || !text->is_object())
    config.fail("Gemma3ForConditionalGeneration needs \"text_config\", an object with the language model's keys",
                "ferry runs Gemma 3's language model; its settings are config.json's text_config.");
  GemmaConfig c = GemmaConfig::gemma3_from_json(ConfigJson::from_json(*text, config.where() + ": text_config"));
  // transformers ties by Gemma3Config's own key (default true), whatever text_config says.
  c.tie_word_embeddings = config.get_bool("tie_word_embeddings", true);
  log_once(LogLevel::Warning,
           "Gemma3ForConditionalGeneration: ferry runs its language model only; the checkpoint's vision_tower and "
           "multi_modal_projector tensors are not loaded (images are not supported)");
  return std::make_shared<Gemma3ForConditionalGeneration>(c, dtype);
}

}  // namespace ferry::models
