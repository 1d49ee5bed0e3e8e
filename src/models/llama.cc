// Llama, Mistral, Qwen2 and Qwen3 causal LMs, after transformers' modeling_llama.py (LLaMA: arXiv 2302.13971; Llama
// 2: arXiv 2307.09288), modeling_mistral.py (arXiv 2310.06825), modeling_qwen2.py and modeling_qwen3.py (Qwen3:
// arXiv 2505.09388). One implementation serves the four: they differ in which projections carry a bias, which layers
// use sliding-window attention, and (Qwen3) an RMSNorm of each query and key head before RoPE.
//
// Where ferry differs from transformers, and why:
//  - Activations are f32 whatever the weights' dtype (ops convert weights on the fly); transformers computes in the
//    weights' dtype. f16/bf16 logits therefore differ slightly, and ferry's are the more precise.
//  - rotary_emb returns inv_freq, not (cos, sin): ops::apply_rotary_ forms the angles itself (nn/rotary.h).
//  - repeat_kv and the causal / sliding-window mask live inside ops::attention, which reads grouped KV heads in
//    place instead of copying them Hq/Hkv times.
//  - Batches are flattened, not padded (a KvCacheBatch in past_key_values), so there is no attention_mask.
#include "ferry/models/llama.h"

#include <algorithm>
#include <cmath>

#include "ferry/core/error.h"
#include "ferry/ops/elementwise.h"
#include "ferry/ops/rotary.h"

namespace ferry::models {

namespace {

// Mistral and Qwen2 default sliding_window to 4096 when the key is absent; an explicit null turns it off.
std::optional<int64_t> sliding_window_key(const ConfigJson& j) {
  if (!j.json().contains("sliding_window")) return 4096;
  std::optional<int64_t> w = j.get_optional_int("sliding_window");
  if (w && *w <= 0) j.fail("\"sliding_window\" must be positive, got " + std::to_string(*w));
  return w;
}

void read_llama_keys(const ConfigJson& j, LlamaConfig& c) {
  c.qkv_bias = c.o_proj_bias = j.get_bool("attention_bias", false);
  c.mlp_bias = j.get_bool("mlp_bias", false);
}

void read_mistral_keys(const ConfigJson& j, LlamaConfig& c) {
  if (const std::optional<int64_t> w = sliding_window_key(j)) c.sliding_window.assign(c.sliding_window.size(), *w);
}

// Qwen2 and Qwen3: sliding windows per use_sliding_window, layer_types or max_window_layers.
void read_qwen_sliding_windows(const ConfigJson& j, LlamaConfig& c) {
  if (!j.get_bool("use_sliding_window", false)) return;  // sliding_window is then not read at all
  const std::optional<int64_t> w = sliding_window_key(j);
  if (!w) return;
  std::vector<int64_t>& windows = c.sliding_window;
  // layer_types when given, else sliding from layer max_window_layers upwards (Qwen2Config.__post_init__).
  const auto it = j.json().find("layer_types");
  if (it != j.json().end() && !it->is_null()) {
    if (!it->is_array() || static_cast<int64_t>(it->size()) != c.num_hidden_layers)
      j.fail("\"layer_types\" must list one type per layer (" + std::to_string(c.num_hidden_layers) + ")");
    for (std::size_t i = 0; i < windows.size(); ++i) {
      const auto& t = (*it)[i];
      if (!t.is_string() || (t != "sliding_attention" && t != "full_attention"))
        j.fail("\"layer_types\"[" + std::to_string(i) + "] must be \"full_attention\" or \"sliding_attention\"");
      if (t == "sliding_attention") windows[i] = *w;
    }
    return;
  }
  const int64_t first = j.get_int("max_window_layers", 28);
  for (int64_t i = first < 0 ? 0 : first; i < c.num_hidden_layers; ++i) windows[static_cast<std::size_t>(i)] = *w;
}

void read_qwen2_keys(const ConfigJson& j, LlamaConfig& c) {
  c.qkv_bias = true;  // Qwen2Attention: q/k/v with bias, o_proj without, whatever the config says
  read_qwen_sliding_windows(j, c);
}

void read_qwen3_keys(const ConfigJson& j, LlamaConfig& c) {
  c.qkv_bias = c.o_proj_bias = j.get_bool("attention_bias", false);  // Qwen3Attention: all four, or none
  c.qk_norm = true;
  if (!j.json().contains("head_dim")) c.head_dim = 128;  // Qwen3Config's default, not hidden_size / heads
  read_qwen_sliding_windows(j, c);
}

void require_positive(const ConfigJson& j, const char* key, int64_t v) {
  if (v <= 0) j.fail("\"" + std::string(key) + "\" must be positive, got " + std::to_string(v));
}

// ---- mixtures of experts ----------------------------------------------------------------------------------------

// The sparse blocks' shape shared by the MoE variants: experts, top_k, widths; every layer sparse.
void read_moe_shape(const ConfigJson& j, LlamaConfig& c, const char* experts_key, int64_t default_experts,
                    int64_t default_top_k) {
  MoeConfig& m = c.moe;
  m.class_prefix = c.class_prefix;
  m.hidden_size = c.hidden_size;
  m.num_experts = j.get_int(experts_key, default_experts);
  m.top_k = j.get_int("num_experts_per_tok", default_top_k);
  require_positive(j, experts_key, m.num_experts);
  require_positive(j, "num_experts_per_tok", m.top_k);
  if (m.top_k > m.num_experts)
    j.fail("\"num_experts_per_tok\" (" + std::to_string(m.top_k) + ") is more than the number of experts (\"" +
           experts_key + "\": " + std::to_string(m.num_experts) + ")");
  c.sparse_layers.assign(static_cast<std::size_t>(c.num_hidden_layers), true);
}

// Qwen2-MoE / Qwen3-MoE: a layer is sparse unless listed in mlp_only_layers, and only every decoder_sparse_step-th
// (Qwen2MoeDecoderLayer: (layer_idx + 1) % decoder_sparse_step == 0).
void read_qwen_sparse_layers(const ConfigJson& j, LlamaConfig& c) {
  const int64_t step = j.get_int("decoder_sparse_step", 1);
  require_positive(j, "decoder_sparse_step", step);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.sparse_layers[static_cast<std::size_t>(i)] = (i + 1) % step == 0;
  const auto it = j.json().find("mlp_only_layers");
  if (it == j.json().end() || it->is_null()) return;
  if (!it->is_array()) j.fail("\"mlp_only_layers\" must be a list of layer indices");
  for (const auto& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.num_hidden_layers)
      j.fail("\"mlp_only_layers\" lists " + v.dump() + ", which is not a layer index (0.." +
             std::to_string(c.num_hidden_layers - 1) + ")");
    c.sparse_layers[v.get<std::size_t>()] = false;
  }
}

// Builds each layer's feed-forward: the sparse block where sparse_layers says, else the dense MLP of width
// intermediate_size under the family's "<prefix>MLP".
void use_sparse_blocks(LlamaConfig& c) {
  c.feed_forward = [moe = c.moe, sparse = c.sparse_layers,
                    dense = c.intermediate_size](int64_t layer, DType dtype) -> std::shared_ptr<nn::Module> {
    if (sparse[static_cast<std::size_t>(layer)]) return std::make_shared<SparseMoeBlock>(moe, dtype);
    return std::make_shared<GatedMLP>(moe.class_prefix + "MLP", moe.names, moe.hidden_size, dense, dtype);
  };
}

void read_mixtral_keys(const ConfigJson& j, LlamaConfig& c) {
  // MixtralConfig: sliding_window None, rms_norm_eps 1e-5, rope_theta 1e6 when absent.
  if (const std::optional<int64_t> w = j.get_optional_int("sliding_window")) {
    if (*w <= 0) j.fail("\"sliding_window\" must be positive, got " + std::to_string(*w));
    c.sliding_window.assign(c.sliding_window.size(), *w);
  }
  if (!j.has("rms_norm_eps")) c.rms_norm_eps = 1e-5;
  if (!j.has("rope_parameters") && !j.has("rope_theta") && !j.has("rope_scaling"))
    c.rope = j.rope_parameters(c.max_position_embeddings, 1e6);
  read_moe_shape(j, c, "num_local_experts", 8, 2);
  c.moe.expert_class = "MixtralBlockSparseTop2MLP";
  c.moe.names = {"w1", "w3", "w2"};
  c.moe.expert_intermediate_size = c.intermediate_size;
  c.moe.norm_topk_prob = true;  // MixtralTopKRouter always renormalises the top k
  c.feed_forward_name = "block_sparse_moe";
  use_sparse_blocks(c);
}

void read_qwen_moe_experts(const ConfigJson& j, LlamaConfig& c, int64_t default_experts, int64_t default_top_k,
                           int64_t default_width) {
  // Qwen3MoeConfig maps num_experts to num_local_experts, the name save_pretrained writes; Hub configs say num_experts.
  read_moe_shape(j, c, j.has("num_experts") || !j.has("num_local_experts") ? "num_experts" : "num_local_experts",
                 default_experts, default_top_k);
  c.moe.expert_class = c.class_prefix + "MLP";
  c.moe.expert_intermediate_size = j.get_int("moe_intermediate_size", default_width);
  require_positive(j, "moe_intermediate_size", c.moe.expert_intermediate_size);
  c.moe.norm_topk_prob = j.get_bool("norm_topk_prob", false);
  read_qwen_sparse_layers(j, c);
}

void read_qwen2_moe_keys(const ConfigJson& j, LlamaConfig& c) {
  c.qkv_bias = j.get_bool("qkv_bias", true);
  // Qwen2MoeConfig.__post_init__: layer_types when given, else sliding on the even layers below max_window_layers.
  if (j.get_bool("use_sliding_window", false) &&
      !(j.json().contains("layer_types") && !j.json()["layer_types"].is_null())) {
    if (const std::optional<int64_t> w = sliding_window_key(j)) {
      const int64_t below = j.get_int("max_window_layers", 28);
      for (int64_t i = 0; i < c.num_hidden_layers && i < below; i += 2)
        c.sliding_window[static_cast<std::size_t>(i)] = *w;
    }
  } else {
    read_qwen_sliding_windows(j, c);
  }
  read_qwen_moe_experts(j, c, 60, 4, 1408);
  c.moe.shared_expert_intermediate_size = j.get_int("shared_expert_intermediate_size", 5632);
  if (c.moe.shared_expert_intermediate_size < 0)
    j.fail("\"shared_expert_intermediate_size\" must not be negative, got " +
           std::to_string(c.moe.shared_expert_intermediate_size));
  use_sparse_blocks(c);
}

void read_qwen3_moe_keys(const ConfigJson& j, LlamaConfig& c) {
  c.qkv_bias = c.o_proj_bias = j.get_bool("attention_bias", false);
  c.qk_norm = true;  // head_dim: the key, else hidden_size / heads (Qwen3MoeAttention's getattr)
  // Qwen3MoeConfig: with use_sliding_window every layer slides (no layer_types, no max_window_layers).
  if (j.get_bool("use_sliding_window", false))
    if (const std::optional<int64_t> w = sliding_window_key(j)) c.sliding_window.assign(c.sliding_window.size(), *w);
  read_qwen_moe_experts(j, c, 128, 8, 768);
  use_sparse_blocks(c);
}

}  // namespace

// ---- config -----------------------------------------------------------------------------------------------------

const LlamaVariant kLlamaVariant{"LlamaForCausalLM", "Llama", "llama", 2048, 0, read_llama_keys};
const LlamaVariant kMistralVariant{"MistralForCausalLM", "Mistral", "mistral", 4096 * 32, 8, read_mistral_keys};
const LlamaVariant kQwen2Variant{"Qwen2ForCausalLM", "Qwen2", "qwen2", 32768, 32, read_qwen2_keys};
const LlamaVariant kQwen3Variant{"Qwen3ForCausalLM", "Qwen3", "qwen3", 32768, 32, read_qwen3_keys};
const LlamaVariant kMixtralVariant{"MixtralForCausalLM", "Mixtral", "mixtral", 4096 * 32, 8, read_mixtral_keys};
const LlamaVariant kQwen2MoeVariant{"Qwen2MoeForCausalLM", "Qwen2Moe", "qwen2_moe", 32768, 16, read_qwen2_moe_keys};
const LlamaVariant kQwen3MoeVariant{"Qwen3MoeForCausalLM", "Qwen3Moe", "qwen3_moe", 32768, 4, read_qwen3_moe_keys};

LlamaConfig LlamaConfig::from_json(const ConfigJson& j, const LlamaVariant& d) {
  LlamaConfig c;
  c.architecture = d.architecture;
  c.class_prefix = d.class_prefix;
  c.model_type = d.model_type;
  c.vocab_size = j.require_int("vocab_size");
  c.hidden_size = j.require_int("hidden_size");
  c.intermediate_size = j.require_int("intermediate_size");
  c.num_hidden_layers = j.require_int("num_hidden_layers");
  c.num_attention_heads = j.require_int("num_attention_heads");
  for (auto [key, v] : {std::pair{"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size}, {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads}})
    require_positive(j, key, v);
  const bool kv_key_present = j.json().contains("num_key_value_heads");
  c.num_key_value_heads = kv_key_present || d.num_key_value_heads == 0
                              ? j.get_int("num_key_value_heads", c.num_attention_heads)
                              : d.num_key_value_heads;
  require_positive(j, "num_key_value_heads", c.num_key_value_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    j.fail("num_attention_heads (" + std::to_string(c.num_attention_heads) +
           ") must be a multiple of num_key_value_heads (" + std::to_string(c.num_key_value_heads) + ")");
  c.head_dim = j.get_int("head_dim", c.hidden_size / c.num_attention_heads);
  require_positive(j, "head_dim", c.head_dim);
  c.max_position_embeddings = j.get_int("max_position_embeddings", d.max_position_embeddings);
  c.hidden_act = j.get_string("hidden_act", "silu");
  if (c.hidden_act != "silu" && c.hidden_act != "swish")
    j.fail("hidden_act \"" + c.hidden_act + "\" is not supported by ferry's " + c.architecture,
           "ferry implements the SwiGLU MLP (\"silu\").");
  c.rms_norm_eps = j.get_float("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = j.get_bool("tie_word_embeddings", false);
  c.rope = j.rope_parameters(c.max_position_embeddings);
  if (j.get_bool("rope_interleaved", false)) c.rope_layout = ops::RopeLayout::Interleaved;
  c.sliding_window.assign(static_cast<std::size_t>(c.num_hidden_layers), 0);  // full attention unless the variant says
  d.read_own_keys(j, c);
  if (c.head_dim % 2 != 0) j.fail("head_dim " + std::to_string(c.head_dim) + " must be even for rotary embeddings");
  return c;
}

// ---- modules ----------------------------------------------------------------------------------------------------

LlamaMLP::LlamaMLP(const LlamaConfig& c, DType dtype) : prefix_(c.class_prefix) {
  gate_proj = register_module("gate_proj", std::make_shared<nn::Linear>(c.hidden_size, c.intermediate_size, c.mlp_bias, dtype));
  up_proj = register_module("up_proj", std::make_shared<nn::Linear>(c.hidden_size, c.intermediate_size, c.mlp_bias, dtype));
  down_proj = register_module("down_proj", std::make_shared<nn::Linear>(c.intermediate_size, c.hidden_size, c.mlp_bias, dtype));
}

// x: [T, C] -> [T, C]
nn::Value LlamaMLP::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  return (*down_proj)(ops::silu_mul((*gate_proj)(x), (*up_proj)(x)));
}

LlamaAttention::LlamaAttention(const LlamaConfig& c, int64_t layer_idx, DType dtype)
    : prefix_(c.class_prefix),
      layer_idx_(layer_idx),
      num_heads_(c.num_attention_heads),
      num_key_value_heads_(c.num_key_value_heads),
      head_dim_(c.head_dim),
      sliding_window_(c.sliding_window[static_cast<std::size_t>(layer_idx)]),
      scaling_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)))),
      rope_layout_(c.rope_layout) {
  const int64_t q_out = num_heads_ * head_dim_, kv_out = num_key_value_heads_ * head_dim_;
  q_proj = register_module("q_proj", std::make_shared<nn::Linear>(c.hidden_size, q_out, c.qkv_bias, dtype));
  k_proj = register_module("k_proj", std::make_shared<nn::Linear>(c.hidden_size, kv_out, c.qkv_bias, dtype));
  v_proj = register_module("v_proj", std::make_shared<nn::Linear>(c.hidden_size, kv_out, c.qkv_bias, dtype));
  o_proj = register_module("o_proj", std::make_shared<nn::Linear>(q_out, c.hidden_size, c.o_proj_bias, dtype));
  if (c.qk_norm) {
    q_norm = register_module("q_norm",
                             std::make_shared<LlamaRMSNorm>(prefix_ + "RMSNorm", head_dim_, c.rms_norm_eps, dtype));
    k_norm = register_module("k_norm",
                             std::make_shared<LlamaRMSNorm>(prefix_ + "RMSNorm", head_dim_, c.rms_norm_eps, dtype));
  }
}

// x: [T, C] -> [T, C]
nn::Value LlamaAttention::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  const Tensor& position_ids = required_tensor_kwarg(args, "position_ids", type_name());
  const Tensor& inv_freq = required_tensor_kwarg(args, "position_embeddings", type_name());
  const int64_t t = x.size(0);

  Tensor q = (*q_proj)(x).reshape({t, num_heads_, head_dim_});
  Tensor k = (*k_proj)(x).reshape({t, num_key_value_heads_, head_dim_});
  Tensor v = (*v_proj)(x).reshape({t, num_key_value_heads_, head_dim_});
  if (q_norm) {  // Qwen3: each head's query and key normalised over head_dim, before the rotation
    q = (*q_norm)(q);
    k = (*k_norm)(k);
  }
  ops::apply_rotary_(q, position_ids, inv_freq, rope_layout_);
  ops::apply_rotary_(k, position_ids, inv_freq, rope_layout_);

  // Each sequence's queries attend to its own cached keys and values (one cache, or a KvCacheBatch).
  Tensor o = cached_attention(args, type_name(), layer_idx_, q, k, v, scaling_, sliding_window_);
  return (*o_proj)(o.reshape({t, num_heads_ * head_dim_}));
}

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& c, int64_t layer_idx, DType dtype) : prefix_(c.class_prefix) {
  self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(c, layer_idx, dtype));
  mlp = register_module(c.feed_forward_name,
                        c.feed_forward ? c.feed_forward(layer_idx, dtype) : std::make_shared<LlamaMLP>(c, dtype));
  if (!mlp)
    throw Error("the feed-forward builder of layer " + std::to_string(layer_idx) + " returned nothing", prefix_);
  input_layernorm = register_module(
      "input_layernorm", std::make_shared<LlamaRMSNorm>(prefix_ + "RMSNorm", c.hidden_size, c.rms_norm_eps, dtype));
  post_attention_layernorm = register_module(
      "post_attention_layernorm",
      std::make_shared<LlamaRMSNorm>(prefix_ + "RMSNorm", c.hidden_size, c.rms_norm_eps, dtype));
}

// x: [T, C] -> [T, C]; the named arguments go on to self_attn.
nn::Value LlamaDecoderLayer::forward(const nn::Args& args) {
  const Tensor& x = args[0].tensor();
  Tensor h = ops::add(x, (*self_attn)(nn::Args({(*input_layernorm)(x)}, args.kwargs)).tensor());
  ops::add_(h, (*mlp)((*post_attention_layernorm)(h)));
  return h;
}

LlamaModel::LlamaModel(const LlamaConfig& c, DType dtype) : prefix_(c.class_prefix) {
  embed_tokens = register_module("embed_tokens", std::make_shared<nn::Embedding>(c.vocab_size, c.hidden_size, dtype));
  layers = register_module("layers", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(std::make_shared<LlamaDecoderLayer>(c, i, dtype));
  norm = register_module("norm", std::make_shared<LlamaRMSNorm>(prefix_ + "RMSNorm", c.hidden_size, c.rms_norm_eps, dtype));
  rotary_emb = register_module(
      "rotary_emb", std::make_shared<nn::RotaryEmbedding>(prefix_ + "RotaryEmbedding", c.head_dim, c.rope));
}

// input_ids [T] -> Dict{last_hidden_state: f32 [T, C], past_key_values}
nn::Value LlamaModel::forward(const nn::Args& args) {
  CausalLMInputs in = parse_causal_lm_inputs(args, static_cast<int64_t>(layers->size()), type_name());
  Tensor hidden = (*embed_tokens)(in.input_ids);
  Tensor inv_freq = (*rotary_emb)(nn::Args{}).tensor();
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

CausalLMInfo llama_info(const LlamaConfig& c) {
  CausalLMInfo i = model_layers_info(c.architecture, c.model_type, c.class_prefix + "DecoderLayer",
                                     {c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
                                      c.num_key_value_heads, c.head_dim, c.max_position_embeddings,
                                      c.tie_word_embeddings});
  if (c.moe.num_experts > 0) {
    i.experts.num_experts = c.moe.num_experts;
    i.experts.experts_per_token = c.moe.top_k;
    i.experts.sparse_layers = std::count(c.sparse_layers.begin(), c.sparse_layers.end(), true);
    i.experts.expert_class = c.moe.expert_class;
    i.experts.sparse_block_class = c.moe.class_prefix + "SparseMoeBlock";
  }
  return i;
}

}  // namespace

LlamaForCausalLM::LlamaForCausalLM(const LlamaConfig& c, DType dtype) : CausalLM(llama_info(c)), config_(c) {
  model = register_module("model", std::make_shared<LlamaModel>(c, dtype));
  lm_head = register_lm_head(*this, *model->embed_tokens, c.hidden_size, c.vocab_size, c.tie_word_embeddings, dtype);
}

// causal_lm.h's forward contract.
nn::Value LlamaForCausalLM::forward(const nn::Args& args) {
  return forward_through_head(*model, *lm_head, args, type_name());
}

std::shared_ptr<CausalLM> make_llama_family(const ConfigJson& config, const LlamaVariant& variant, DType dtype) {
  return std::make_shared<LlamaForCausalLM>(LlamaConfig::from_json(config, variant), dtype);
}

}  // namespace ferry::models
