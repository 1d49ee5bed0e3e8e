// T5ForConditionalGeneration (see include/ferry/models/t5.h), after transformers' modeling_t5.py.
//
// Where ferry differs from transformers, and why:
//  - Activations are f32 whatever the weights' dtype, so T5's f16 overflow cannot happen and transformers' clamping
//    of hidden states to the f16 range (in every T5Block when the dtype is f16) has no counterpart here.
//  - Batch size 1 without padding: no attention masks; the decoder's causal mask is the attention op's.
#include "ferry/models/t5.h"

#include <cmath>

#include "ferry/core/error.h"
#include "ferry/models/causal_lm.h"
#include "ferry/nn/activation.h"
#include "ferry/ops/attention.h"
#include "ferry/ops/elementwise.h"
#include "ferry/ops/gather.h"

namespace ferry::models {

// ---- config -----------------------------------------------------------------------------------------------------

T5Config T5Config::from_json(const ConfigJson& j) {
  T5Config c;
  c.model_type = j.model_type().empty() ? "t5" : j.model_type();
  c.vocab_size = j.get_int("vocab_size", c.vocab_size);
  c.d_model = j.get_int("d_model", c.d_model);
  c.d_kv = j.get_int("d_kv", c.d_kv);
  c.d_ff = j.get_int("d_ff", c.d_ff);
  c.num_layers = j.get_int("num_layers", c.num_layers);
  c.num_decoder_layers = j.get_optional_int("num_decoder_layers").value_or(c.num_layers);
  c.num_heads = j.get_int("num_heads", c.num_heads);
  c.relative_attention_num_buckets = j.get_int("relative_attention_num_buckets", c.relative_attention_num_buckets);
  c.relative_attention_max_distance = j.get_int("relative_attention_max_distance", c.relative_attention_max_distance);
  for (auto [key, v] : {std::pair{"vocab_size", c.vocab_size}, {"d_model", c.d_model}, {"d_kv", c.d_kv},
                        {"d_ff", c.d_ff}, {"num_layers", c.num_layers}, {"num_decoder_layers", c.num_decoder_layers},
                        {"num_heads", c.num_heads}, {"relative_attention_num_buckets", c.relative_attention_num_buckets},
                        {"relative_attention_max_distance", c.relative_attention_max_distance}})
    if (v <= 0) j.fail("\"" + std::string(key) + "\" must be positive, got " + std::to_string(v));
  if (c.relative_attention_num_buckets < 4)
    j.fail("\"relative_attention_num_buckets\" must be at least 4, got " + std::to_string(c.relative_attention_num_buckets));
  c.layer_norm_epsilon = j.get_float("layer_norm_epsilon", c.layer_norm_epsilon);
  c.dropout_rate = j.get_float("dropout_rate", c.dropout_rate);
  // feed_forward_proj: "relu" | "gelu" | "gated-gelu" | "gated-silu" ... (T5Config.__post_init__).
  const std::string ffp = j.get_string("feed_forward_proj", "relu");
  const auto dash = ffp.find('-');
  if ((dash != std::string::npos && ffp.substr(0, dash) != "gated") || ffp.find('-', dash + 1) != std::string::npos)
    j.fail("\"feed_forward_proj\" \"" + ffp + "\" is not \"ACT\" or \"gated-ACT\"", "e.g. \"relu\" or \"gated-gelu\"");
  c.is_gated_act = dash != std::string::npos;
  c.dense_act_fn = c.is_gated_act ? ffp.substr(dash + 1) : ffp;
  if (ffp == "gated-gelu") c.dense_act_fn = "gelu_new";
  try {
    nn::check_activation(c.dense_act_fn);
  } catch (const Error& e) {
    j.fail(std::string("\"feed_forward_proj\": ") + e.what());
  }
  // transformers 5 always ties the input embeddings and records whether the head output is scaled separately;
  // older configs say tie_word_embeddings = false for v1.1 (untied head, no scaling).
  c.tie_word_embeddings = j.get_bool("tie_word_embeddings", true);
  c.scale_decoder_outputs = j.get_bool("scale_decoder_outputs", c.tie_word_embeddings);
  c.pad_token_id = j.get_optional_int("pad_token_id").value_or(0);
  c.decoder_start_token_id = j.get_optional_int("decoder_start_token_id").value_or(c.pad_token_id);
  const auto it = j.json().find("eos_token_id");
  if (it != j.json().end() && it->is_number_integer()) c.eos_token_ids = {it->get<int64_t>()};
  else if (it != j.json().end() && it->is_array()) c.eos_token_ids = it->get<std::vector<int64_t>>();
  const std::optional<std::string> arch = j.architecture();
  c.per_layer_position_bias = c.model_type == "umt5";
  c.architecture = c.model_type == "mt5"    ? "MT5ForConditionalGeneration"
                   : c.model_type == "umt5" ? "UMT5ForConditionalGeneration"
                                            : "T5ForConditionalGeneration";
  if (arch && *arch != c.architecture) c.architecture = *arch;
  return c;
}

int64_t t5_relative_position_bucket(int64_t relative_position, bool bidirectional, int64_t num_buckets,
                                    int64_t max_distance) {
  int64_t bucket = 0;
  if (bidirectional) {
    num_buckets /= 2;
    if (relative_position > 0) bucket += num_buckets;
    relative_position = std::abs(relative_position);
  } else {
    relative_position = -std::min<int64_t>(relative_position, 0);
  }
  const int64_t max_exact = num_buckets / 2;
  if (relative_position < max_exact) return bucket + relative_position;
  // As torch computes it: f32 log of the f32 ratio, divided by the (double) log of max_distance / max_exact, times
  // the number of log buckets, truncated.
  const float ratio = std::log(static_cast<float>(relative_position) / static_cast<float>(max_exact)) /
                      static_cast<float>(std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)));
  const auto large = max_exact + static_cast<int64_t>(ratio * static_cast<float>(num_buckets - max_exact));
  return bucket + std::min(large, num_buckets - 1);
}

// ---- modules ----------------------------------------------------------------------------------------------------

T5Attention::T5Attention(const T5Config& c, bool has_relative_attention_bias, bool is_decoder, bool is_cross,
                         int64_t layer_idx, DType dtype)
    : is_decoder_(is_decoder),
      is_cross_(is_cross),
      layer_idx_(layer_idx),
      num_heads_(c.num_heads),
      d_kv_(c.d_kv),
      num_buckets_(c.relative_attention_num_buckets),
      max_distance_(c.relative_attention_max_distance) {
  const int64_t inner = c.num_heads * c.d_kv;
  q = register_module("q", std::make_shared<nn::Linear>(c.d_model, inner, false, dtype));
  k = register_module("k", std::make_shared<nn::Linear>(c.d_model, inner, false, dtype));
  v = register_module("v", std::make_shared<nn::Linear>(c.d_model, inner, false, dtype));
  o = register_module("o", std::make_shared<nn::Linear>(inner, c.d_model, false, dtype));
  if (has_relative_attention_bias) {
    relative_attention_bias = register_module(
        "relative_attention_bias", std::make_shared<nn::Embedding>(c.relative_attention_num_buckets, c.num_heads, dtype));
    relative_attention_bias->read_whole_table();  // every bucket, for every call
  }
}

Tensor T5Attention::compute_bias(int64_t query_length, int64_t key_length, int64_t past, Device device) {
  std::vector<int64_t> buckets;
  buckets.reserve(static_cast<std::size_t>(query_length * key_length));
  for (int64_t t = 0; t < query_length; ++t)
    for (int64_t s = 0; s < key_length; ++s)
      buckets.push_back(t5_relative_position_bucket(s - (past + t), !is_decoder_, num_buckets_, max_distance_));
  // values [T·S, H] -> bias [H, T, S]. Through the module, so that an offloaded weight is brought in by its hook.
  const Tensor values =
      (*relative_attention_bias)(Tensor::from_vector(buckets, {query_length * key_length}).to(device)).to(Device::cpu());
  Tensor bias = Tensor::empty({num_heads_, query_length, key_length}, DType::F32);
  const float* src = values.data<float>();
  float* dst = bias.data<float>();
  for (int64_t i = 0; i < query_length * key_length; ++i)
    for (int64_t h = 0; h < num_heads_; ++h) dst[h * query_length * key_length + i] = src[i * num_heads_ + h];
  return bias;
}

// A Seq2SeqBatch: every projection runs on all rows; attention runs per sequence against its own caches (and
// encoder output), with its own position bias (a list of them is passed between blocks).
nn::Value T5Attention::forward_batch(const nn::Args& args, const Seq2SeqBatch& batch) {
  const Tensor& x = args[0].tensor();
  const int64_t t = x.size(0);
  if (batch.total_tokens() != t)
    throw Error("the batch has " + std::to_string(batch.total_tokens()) + " token rows but the layer got " +
                    std::to_string(t),
                type_name());
  Tensor qs = (*q)(x).reshape({t, num_heads_, d_kv_});
  Tensor ks, vs;
  if (!is_cross_) {
    ks = (*k)(x).reshape({t, num_heads_, d_kv_});
    vs = (*v)(x).reshape({t, num_heads_, d_kv_});
  }
  const nn::Value* given = args.kwarg("position_bias");
  const bool have_biases = given != nullptr && given->is_list();
  nn::List biases;
  Tensor out = Tensor::empty({t, num_heads_, d_kv_}, DType::F32, x.device());
  for (int64_t i = 0; i < batch.size(); ++i) {
    const int64_t a = batch.offset(i), b = a + batch[i].tokens;
    EncoderDecoderCache& cache = *batch[i].cache;
    Tensor keys, values, bias;
    int64_t past = 0;
    if (is_cross_) {
      if (!cache.cross(layer_idx_).first.defined()) {
        const Tensor enc = batch[i].encoder_outputs.to(x.device());
        cache.set_cross(layer_idx_, (*k)(enc).reshape({enc.size(0), num_heads_, d_kv_}),
                        (*v)(enc).reshape({enc.size(0), num_heads_, d_kv_}));
      }
      std::tie(keys, values) = cache.cross(layer_idx_);
    } else {
      past = cache.self_attention().seq_length(layer_idx_);
      std::tie(keys, values) = cache.self_attention().update(layer_idx_, ks.slice(a, b), vs.slice(a, b));
      if (have_biases) bias = given->list()[static_cast<std::size_t>(i)].tensor();
      else if (relative_attention_bias) bias = compute_bias(b - a, keys.size(0), past, x.device()).to(x.device());
      else bias = Tensor::zeros({num_heads_, b - a, keys.size(0)}, DType::F32).to(x.device());
    }
    out.slice(a, b).copy_from(ops::attention_with_bias(qs.slice(a, b), keys, values, bias, past, !is_cross_, 1.0f));
    biases.push_back(bias);
  }
  return nn::Dict{{"hidden", (*o)(out.reshape({t, num_heads_ * d_kv_}))}, {"position_bias", biases}};
}

// x: [T, C] -> Dict{hidden [T, C], position_bias}
nn::Value T5Attention::forward(const nn::Args& args) {
  if (is_decoder_)
    if (const auto batch = seq2seq_batch_from_args(args)) return forward_batch(args, *batch);
  const Tensor& x = args[0].tensor();
  const int64_t t = x.size(0);
  Tensor qs = (*q)(x).reshape({t, num_heads_, d_kv_});
  const auto cache = is_decoder_ ? encoder_decoder_cache_from_args(args, type_name()) : nullptr;
  Tensor keys, values;
  int64_t past = 0;
  if (is_cross_) {
    const nn::Value* enc = args.kwarg("encoder_hidden_states");
    if (cache && cache->cross(layer_idx_).first.defined()) {
      std::tie(keys, values) = cache->cross(layer_idx_);
    } else {
      if (enc == nullptr || !enc->is_tensor())
        throw Error("cross-attention needs \"encoder_hidden_states\"", type_name(), "Call it through T5Stack.");
      const Tensor& e = enc->tensor();
      keys = (*k)(e).reshape({e.size(0), num_heads_, d_kv_});
      values = (*v)(e).reshape({e.size(0), num_heads_, d_kv_});
      if (cache) cache->set_cross(layer_idx_, keys, values);
    }
  } else {
    Tensor ks = (*k)(x).reshape({t, num_heads_, d_kv_});
    Tensor vs = (*v)(x).reshape({t, num_heads_, d_kv_});
    if (cache) {
      past = cache->self_attention().seq_length(layer_idx_);
      std::tie(keys, values) = cache->self_attention().update(layer_idx_, ks, vs);
    } else {
      keys = ks;
      values = vs;
    }
  }
  Tensor bias;
  if (!is_cross_) {
    const nn::Value* given = args.kwarg("position_bias");
    if (given != nullptr && given->is_tensor()) bias = given->tensor();
    else if (relative_attention_bias) bias = compute_bias(t, keys.size(0), past, x.device()).to(x.device());
    else bias = Tensor::zeros({num_heads_, t, keys.size(0)}, DType::F32).to(x.device());
  }
  Tensor out = ops::attention_with_bias(qs, keys, values, bias, past, /*causal=*/is_decoder_ && !is_cross_, 1.0f);
  return nn::Dict{{"hidden", (*o)(out.reshape({t, num_heads_ * d_kv_}))}, {"position_bias", bias}};
}

T5DenseActDense::T5DenseActDense(const T5Config& c, DType dtype) : gated_(c.is_gated_act), act_(c.dense_act_fn) {
  if (gated_) {
    wi_0 = register_module("wi_0", std::make_shared<nn::Linear>(c.d_model, c.d_ff, false, dtype));
    wi_1 = register_module("wi_1", std::make_shared<nn::Linear>(c.d_model, c.d_ff, false, dtype));
  } else {
    wi = register_module("wi", std::make_shared<nn::Linear>(c.d_model, c.d_ff, false, dtype));
  }
  wo = register_module("wo", std::make_shared<nn::Linear>(c.d_ff, c.d_model, false, dtype));
}

nn::Value T5DenseActDense::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  Tensor h = gated_ ? ops::mul(nn::activation(act_, (*wi_0)(x)), (*wi_1)(x)) : nn::activation(act_, (*wi)(x));
  return (*wo)(h);
}

T5Sublayer::T5Sublayer(Kind kind, const T5Config& c, bool has_relative_attention_bias, bool is_decoder,
                       int64_t layer_idx, DType dtype)
    : kind_(kind) {
  switch (kind) {
    case Kind::SelfAttention:
      inner_ = register_module("SelfAttention", std::make_shared<T5Attention>(c, has_relative_attention_bias,
                                                                              is_decoder, false, layer_idx, dtype));
      break;
    case Kind::CrossAttention:
      inner_ = register_module("EncDecAttention",
                               std::make_shared<T5Attention>(c, false, is_decoder, true, layer_idx, dtype));
      break;
    case Kind::FeedForward:
      inner_ = register_module("DenseReluDense", std::make_shared<T5DenseActDense>(c, dtype));
      break;
  }
  layer_norm_ = register_module("layer_norm", std::make_shared<T5LayerNorm>(c.d_model, c.layer_norm_epsilon, dtype));
  register_module("dropout", std::make_shared<nn::Dropout>(c.dropout_rate));
}

std::string T5Sublayer::type_name() const {
  switch (kind_) {
    case Kind::SelfAttention: return "T5LayerSelfAttention";
    case Kind::CrossAttention: return "T5LayerCrossAttention";
    case Kind::FeedForward: return "T5LayerFF";
  }
  return "T5Layer";
}

nn::Value T5Sublayer::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  Tensor normed = (*layer_norm_)(x);
  if (kind_ == Kind::FeedForward) return ops::add(x, (*inner_)(normed));
  nn::Value out = (*inner_)(nn::Args({normed}, args.kwargs));
  return nn::Dict{{"hidden", ops::add(x, out.dict().at("hidden").tensor())},
                  {"position_bias", out.dict().at("position_bias")}};
}

T5Block::T5Block(const T5Config& c, bool is_decoder, int64_t layer_idx, DType dtype) : is_decoder_(is_decoder) {
  layer = register_module("layer", std::make_shared<nn::ModuleList>());
  const bool first = layer_idx == 0 || c.per_layer_position_bias;
  layer->push_back(std::make_shared<T5Sublayer>(T5Sublayer::Kind::SelfAttention, c, first, is_decoder, layer_idx, dtype));
  if (is_decoder)
    layer->push_back(std::make_shared<T5Sublayer>(T5Sublayer::Kind::CrossAttention, c, false, true, layer_idx, dtype));
  layer->push_back(std::make_shared<T5Sublayer>(T5Sublayer::Kind::FeedForward, c, false, is_decoder, layer_idx, dtype));
}

// x: [T, C] -> Dict{hidden, position_bias}; kwargs: position_bias (blocks after the first), past_key_values and
// encoder_hidden_states (decoder).
nn::Value T5Block::forward(const nn::Args& args) {
  nn::Value self = (*layer)[0](nn::Args({args[0]}, args.kwargs));
  Tensor h = self.dict().at("hidden").tensor();
  if (is_decoder_) h = (*layer)[1](nn::Args({h}, args.kwargs)).dict().at("hidden").tensor();
  h = (*layer)[is_decoder_ ? 2 : 1](nn::Args{h}).tensor();
  return nn::Dict{{"hidden", h}, {"position_bias", self.dict().at("position_bias")}};
}

T5Stack::T5Stack(const T5Config& c, bool is_decoder, DType dtype)
    : is_decoder_(is_decoder), per_layer_bias_(c.per_layer_position_bias) {
  embed_tokens = register_module("embed_tokens", std::make_shared<nn::Embedding>(c.vocab_size, c.d_model, dtype));
  block = register_module("block", std::make_shared<nn::ModuleList>());
  const int64_t n = is_decoder ? c.num_decoder_layers : c.num_layers;
  for (int64_t i = 0; i < n; ++i) block->push_back(std::make_shared<T5Block>(c, is_decoder, i, dtype));
  final_layer_norm = register_module("final_layer_norm", std::make_shared<T5LayerNorm>(c.d_model, c.layer_norm_epsilon, dtype));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(c.dropout_rate));
}

// input_ids [T] -> hidden [T, C]; kwargs for the decoder: encoder_hidden_states, past_key_values.
nn::Value T5Stack::forward(const nn::Args& args) {
  const Tensor* ids = args.tensor_arg(0, "input_ids");
  if (ids == nullptr || ids->dtype() != DType::I64 || ids->dim() != 1 || ids->size(0) == 0)
    throw Error("needs input_ids, a non-empty i64 [T]", type_name());
  Tensor hidden = (*embed_tokens)(*ids);
  nn::Value bias;
  for (std::size_t i = 0; i < block->size(); ++i) {
    nn::Args block_args{hidden};
    block_args.kwargs = args.kwargs;
    if (i > 0 && !per_layer_bias_) block_args.with("position_bias", bias);  // T5: block 0's bias for every block
    nn::Value out = (*block)[i](std::move(block_args));
    hidden = out.dict().at("hidden").tensor();
    bias = out.dict().at("position_bias");
  }
  return (*dropout)((*final_layer_norm)(hidden));
}

namespace {

Seq2SeqLMInfo t5_info(const T5Config& c) {
  Seq2SeqLMInfo i;
  i.architecture = c.architecture;
  i.model_type = c.model_type;
  i.block_class = "T5Block";
  i.is_encoder_decoder = true;
  i.vocab_size = c.vocab_size;
  i.hidden_size = c.d_model;
  i.num_layers = c.num_layers;
  i.num_cached_layers = c.num_decoder_layers;
  i.num_attention_heads = i.num_key_value_heads = c.num_heads;
  i.head_dim = c.d_kv;
  i.decoder_start_token_id = c.decoder_start_token_id;
  i.eos_token_ids = c.eos_token_ids;
  // Run once per prompt: the encoder, and the projections of its output into each decoder block's cross-attention
  // keys and values (cached by EncoderDecoderCache).
  i.prompt_modules = {"encoder"};
  for (int64_t b = 0; b < c.num_decoder_layers; ++b)
    for (const char* p : {"k", "v"})
      i.prompt_modules.push_back("decoder.block." + std::to_string(b) + ".layer.1.EncDecAttention." + p);
  return i;
}

}  // namespace

T5ForConditionalGeneration::T5ForConditionalGeneration(const T5Config& c, DType dtype)
    : Seq2SeqLM(t5_info(c)), config_(c) {
  shared = register_module("shared", std::make_shared<nn::Embedding>(c.vocab_size, c.d_model, dtype));
  encoder = register_module("encoder", std::make_shared<T5Stack>(c, false, dtype));
  decoder = register_module("decoder", std::make_shared<T5Stack>(c, true, dtype));
  lm_head = register_module("lm_head", std::make_shared<nn::Linear>(c.d_model, c.vocab_size, false, dtype));
  encoder->embed_tokens->register_parameter("weight", shared->parameter_slot("weight"));
  decoder->embed_tokens->register_parameter("weight", shared->parameter_slot("weight"));
  if (c.tie_word_embeddings) lm_head->register_parameter("weight", shared->parameter_slot("weight"));
}

// seq2seq_lm.h's forward contract.
nn::Value T5ForConditionalGeneration::forward(const nn::Args& args) {
  const std::string where = type_name();
  if (const auto batch = seq2seq_batch_from_args(args)) return forward_batch(args, *batch);
  Tensor encoder_out;
  if (const nn::Value* e = args.kwarg("encoder_outputs"); e != nullptr && e->is_tensor()) {
    encoder_out = e->tensor();
  } else {
    const Tensor* ids = args.tensor_arg(0, "input_ids");
    if (ids == nullptr) throw Error("forward needs input_ids (the encoder's input) or encoder_outputs", where);
    encoder_out = (*encoder)(nn::Args{ids->reshape({-1})}).tensor();
  }
  const nn::Value* dec = args.kwarg("decoder_input_ids");
  if (dec == nullptr || dec->is_none()) return nn::Dict{{"encoder_last_hidden_state", encoder_out}};
  if (!dec->is_tensor() || dec->tensor().dtype() != DType::I64)
    throw Error("decoder_input_ids must be an i64 tensor", where);
  auto cache = encoder_decoder_cache_from_args(args, where);
  if (!cache) cache = make_cache();
  nn::Args dargs{dec->tensor().reshape({-1})};
  dargs.with("encoder_hidden_states", encoder_out).with("past_key_values", cache_value(cache));
  Tensor hidden = (*decoder)(std::move(dargs)).tensor();
  hidden = slice_logits_to_keep(hidden, logits_to_keep_arg(args, where));
  if (config_.scale_decoder_outputs) hidden = ops::scale(hidden, static_cast<float>(1.0 / std::sqrt(double(config_.d_model))));
  return nn::Dict{{"logits", (*lm_head)(hidden)}, {"encoder_last_hidden_state", encoder_out},
                  {"past_key_values", cache_value(cache)}};
}

// The decoder over a Seq2SeqBatch (each sequence's caches and encoder output travel inside it); logits_to_keep
// counts per sequence.
nn::Value T5ForConditionalGeneration::forward_batch(const nn::Args& args, const Seq2SeqBatch& batch) {
  const nn::Value* dec = args.kwarg("decoder_input_ids");
  if (dec == nullptr || !dec->is_tensor() || dec->tensor().dtype() != DType::I64)
    throw Error("a batched forward needs decoder_input_ids (i64)", type_name());
  nn::Args dargs{dec->tensor().reshape({-1})};
  dargs.with("past_key_values", *args.kwarg("past_key_values"));
  Tensor hidden = (*decoder)(std::move(dargs)).tensor();
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < batch.size(); ++i) tokens.push_back(batch[i].tokens);
  hidden = keep_last_rows_per_sequence(hidden, tokens, logits_to_keep_arg(args, type_name()));
  if (config_.scale_decoder_outputs) hidden = ops::scale(hidden, static_cast<float>(1.0 / std::sqrt(double(config_.d_model))));
  return nn::Dict{{"logits", (*lm_head)(hidden)}, {"past_key_values", *args.kwarg("past_key_values")}};
}

std::shared_ptr<Seq2SeqLM> make_t5(const ConfigJson& config, DType dtype) {
  return std::make_shared<T5ForConditionalGeneration>(T5Config::from_json(config), dtype);
}

}  // namespace ferry::models
