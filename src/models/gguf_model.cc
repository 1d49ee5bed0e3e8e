// GGUF -> HF config, names and tensors (see include/ferry/models/gguf_model.h).
#include "ferry/models/gguf_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <unordered_map>

#include "ferry/core/error.h"
#include "ferry/core/quant.h"
#include "ferry/nn/module_tensors.h"

namespace ferry::models {
namespace {

std::string arch_of(const io::GgufFile& f) { return f.require_string("general.architecture"); }

[[noreturn]] void unsupported(const io::GgufFile& f, const std::string& key, const std::string& problem,
                              const std::string& hint) {
  throw Error(problem, f.where() + ": " + key, hint);
}

// A mixture of experts' shape: counts, widths, the shared expert, and llama.cpp's router
// normalisation for the architecture (its files do not record it).
void read_experts(const io::GgufFile& f, const GgufArchitecture& g, const std::string& p, int64_t experts,
                  nlohmann::json& c) {
  const int64_t used = f.require_int(p + "expert_used_count");
  if (used <= 0 || used > experts)
    unsupported(f, p + "expert_used_count",
                "expert_used_count " + std::to_string(used) + " is not in 1.." + std::to_string(experts) +
                    " (expert_count)",
                "the file is damaged or not a mixture of experts llama.cpp runs");
  c["num_local_experts"] = experts;  // Mixtral's key
  c["num_experts"] = experts;        // Qwen's
  c["num_experts_per_tok"] = used;
  c["norm_topk_prob"] = g.moe_normalizes_top_k;
  if (auto width = f.get_int(p + "expert_feed_forward_length")) c["moe_intermediate_size"] = *width;
  c["shared_expert_intermediate_size"] = f.find_tensor("blk.0.ffn_gate_shexp.weight")
                                             ? f.require_int(p + "expert_shared_feed_forward_length")
                                             : 0;
  // Every layer is sparse, as llama.cpp has it (a layer without a router is a missing tensor, named at loading).
  c["mlp_only_layers"] = nlohmann::json::array();
  c["decoder_sparse_step"] = 1;
}

}  // namespace

bool is_gguf_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

ConfigJson read_model_config(const std::filesystem::path& path) {
  if (is_gguf_file(path)) return gguf_config(io::GgufFile::open(path));
  return ConfigJson::read(path);
}

const GgufArchitecture& gguf_architecture(const io::GgufFile& f) {
  const std::string arch = arch_of(f);
  const GgufArchitecture* g = find_gguf_architecture(arch, f.get_int(arch + ".expert_count").value_or(0) > 0);
  if (!g)
    unsupported(f, "general.architecture", "GGUF architecture \"" + arch + "\" is not supported",
                "ferry reads " + supported_gguf_architectures_list() +
                    " GGUF files; use the Hugging Face folder instead");
  return *g;
}

namespace {

// A float vector tensor the converter writes for the config's sake (rope_freqs, rope_factors_long, ...).
nlohmann::json float_list(const io::GgufFile& f, const std::string& name) {
  const Tensor t = f.tensor(name).to(DType::F32);
  nlohmann::json out = nlohmann::json::array();
  for (float v : t.to_vector<float>()) out.push_back(v);
  return out;
}

// Partial rotary as a fraction of the head that int(head · fraction) turns back into `rotated` (the Python every
// family's config computes its rotary dims with).
double rotary_fraction(int64_t rotated, int64_t head) {
  double fraction = static_cast<double>(rotated) / static_cast<double>(head);
  while (static_cast<int64_t>(static_cast<double>(head) * fraction) < rotated) fraction = std::nextafter(fraction, 2.0);
  return fraction;
}

// Llama, Mistral, Mixtral, Qwen2, Qwen3 and their mixtures of experts (LlamaConfig's keys).
void read_llama_family(const io::GgufFile& f, const GgufArchitecture& g, const std::string& p, nlohmann::json& c) {
  const std::string arch(g.name);
  const int64_t hidden = c["hidden_size"], heads = c["num_attention_heads"];
  if (auto eps = f.get_float(p + "attention.layer_norm_rms_epsilon")) c["rms_norm_eps"] = *eps;
  c["rope_theta"] = f.get_float(p + "rope.freq_base").value_or(10000.0);
  const int64_t head_dim = f.get_int(p + "attention.key_length").value_or(heads > 0 ? hidden / heads : 0);
  c["head_dim"] = head_dim;
  if (auto rot = f.get_int(p + "rope.dimension_count"); rot && *rot != head_dim)
    unsupported(f, p + "rope.dimension_count",
                "partial rotary embeddings (" + std::to_string(*rot) + " of head_dim " + std::to_string(head_dim) +
                    ") are not supported for " + arch,
                "use the Hugging Face folder instead");
  if (f.find_tensor("rope_freqs.weight")) {
    // Llama 3.1+'s rope scaling, as llama.cpp's converter stores it: one divisor per frequency.
    if (auto type = f.get_string(p + "rope.scaling.type"); type && *type != "none")
      unsupported(f, p + "rope.scaling.type", "rope_freqs and rope scaling \"" + *type + "\" together",
                  "the file is not one llama.cpp's converter writes; use the Hugging Face folder instead");
    c["rope_scaling"] = {{"rope_type", "frequency_factors"}, {"factors", float_list(f, "rope_freqs.weight")}};
  } else if (auto type = f.get_string(p + "rope.scaling.type"); type && *type != "none") {
    if (*type != "linear")
      unsupported(f, p + "rope.scaling.type", "rope scaling \"" + *type + "\" is not supported for GGUF files",
                  "use the Hugging Face folder instead");
    c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", f.get_float(p + "rope.scaling.factor").value_or(1.0)}};
  }
  c["attention_bias"] = f.find_tensor("blk.0.attn_q.bias") != nullptr;  // qwen3 (qwen2 always has q/k/v biases)
  if (g.interleaved_qk_rows) {
    // llama.cpp's converter interleaves each head's q/k rows; attention rotates adjacent pairs to match (see
    // LlamaConfig::rope_layout), so the weights stay as the file holds them.
    c["rope_interleaved"] = true;
    c["mlp_bias"] = f.find_tensor("blk.0.ffn_up.bias") != nullptr;
  } else {
    c["use_sliding_window"] = false;
  }
}

// GPT-NeoX / Pythia (gptneox): LayerNorms with biases, partial rotary, parallel residual. The converter reorders
// query_key_value's rows from per-head q|k|v to three blocks q | k | v (fused_qkv_blocks, a ferry extension the
// attention reads); it writes no rope base (llama.cpp then uses 10000) and not the activation (llama.cpp computes
// GELU; ferry uses the folder default "gelu").
void read_gpt_neox(const io::GgufFile& f, const GgufArchitecture&, const std::string& p, nlohmann::json& c) {
  const int64_t head = c["hidden_size"].get<int64_t>() / c["num_attention_heads"].get<int64_t>();
  c.erase("num_key_value_heads");
  if (auto eps = f.get_float(p + "attention.layer_norm_epsilon")) c["layer_norm_eps"] = *eps;
  c["rotary_emb_base"] = f.get_float(p + "rope.freq_base").value_or(10000.0);
  c["rotary_pct"] = rotary_fraction(f.get_int(p + "rope.dimension_count").value_or(head / 4), head);
  c["use_parallel_residual"] = f.get_bool(p + "use_parallel_residual").value_or(true);
  c["attention_bias"] = f.find_tensor("blk.0.attn_qkv.bias") != nullptr;
  c["fused_qkv_blocks"] = true;
}

// Phi-3 / Phi-3.5 / Phi-4 (phi3): fused qkv_proj and gate_up_proj as the folder has them; LongRoPE's factors are
// tensors (rope_factors_short / _long) with the attention factor and original context in the metadata.
void read_phi3(const io::GgufFile& f, const GgufArchitecture&, const std::string& p, nlohmann::json& c) {
  const int64_t head = c["hidden_size"].get<int64_t>() / c["num_attention_heads"].get<int64_t>();
  if (auto eps = f.get_float(p + "attention.layer_norm_rms_epsilon")) c["rms_norm_eps"] = *eps;
  c["rope_theta"] = f.get_float(p + "rope.freq_base").value_or(10000.0);
  c["partial_rotary_factor"] = rotary_fraction(f.get_int(p + "rope.dimension_count").value_or(head), head);
  const int64_t window = f.get_int(p + "attention.sliding_window").value_or(0);
  c["sliding_window"] = window > 0 ? nlohmann::json(window) : nlohmann::json(nullptr);
  if (auto original = f.get_int(p + "rope.scaling.original_context_length"))
    c["original_max_position_embeddings"] = *original;
  const bool has_long = f.find_tensor("rope_factors_long.weight") != nullptr;
  if (has_long != (f.find_tensor("rope_factors_short.weight") != nullptr))
    unsupported(f, has_long ? "rope_factors_short.weight" : "rope_factors_long.weight", "missing",
                "LongRoPE needs both the short and the long factors; the file is damaged");
  if (has_long) {
    if (!c.contains("original_max_position_embeddings"))
      unsupported(f, p + "rope.scaling.original_context_length", "missing",
                  "LongRoPE needs the original context length; the file is damaged");
    c["rope_scaling"] = {{"rope_type", "longrope"},
                         {"short_factor", float_list(f, "rope_factors_short.weight")},
                         {"long_factor", float_list(f, "rope_factors_long.weight")},
                         {"attention_factor", f.get_float(p + "rope.scaling.attn_factor").value_or(1.0)}};
  }
}

// BLOOM (bloom): LayerNorms with biases, ALiBi (no rope keys); query_key_value reordered to q | k | v blocks as for
// gptneox (fused_qkv_blocks). The converter writes context_length = n_embed when the config has no seq_length:
// BLOOM has no context limit of its own, so it is not read.
void read_bloom(const io::GgufFile& f, const GgufArchitecture&, const std::string& p, nlohmann::json& c) {
  if (auto eps = f.get_float(p + "attention.layer_norm_epsilon")) c["layer_norm_epsilon"] = *eps;
  if (c["num_key_value_heads"] != c["num_attention_heads"])
    unsupported(f, p + "attention.head_count_kv", "must equal attention.head_count for bloom",
                "the file is damaged or not a BLOOM model");
  c["fused_qkv_blocks"] = true;
}

// Gemma 2 / Gemma 3 (gemma2, gemma3), as llama.cpp reads them (llama-model.cpp): head_dim from key_length; the
// converter stores every norm weight as 1 + w (norm_weights_include_one, a ferry extension GemmaRMSNorm reads).
// What the files do not hold is llama.cpp's own: attention scaled by 1/√head_dim, except the 27B models (46 layers
// for gemma2, 62 for gemma3) by 1/√(hidden / heads); gemma2 alternates sliding and global layers, gemma3 has every
// sixth global, its sliding layers rotating with base 10000 unscaled and its global ones with rope.freq_base and the
// linear rope.scaling.factor.
void read_gemma(const io::GgufFile& f, const GgufArchitecture& g, const std::string& p, nlohmann::json& c) {
  const bool gemma3 = g.name == "gemma3";
  const int64_t hidden = c["hidden_size"], heads = c["num_attention_heads"], layers = c["num_hidden_layers"];
  if (auto eps = f.get_float(p + "attention.layer_norm_rms_epsilon")) c["rms_norm_eps"] = *eps;
  const int64_t head_dim = f.get_int(p + "attention.key_length").value_or(256);
  c["head_dim"] = head_dim;
  c["query_pre_attn_scalar"] = layers == (gemma3 ? 62 : 46) ? hidden / heads : head_dim;
  c["sliding_window"] = f.get_int(p + "attention.sliding_window").value_or(4096);
  c["norm_weights_include_one"] = true;
  if (!gemma3) {
    const double base = f.get_float(p + "rope.freq_base").value_or(10000.0);
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", base}};
    for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"})
      c[key] = f.get_float(p + key).has_value() ? nlohmann::json(*f.get_float(p + key)) : nlohmann::json(nullptr);
    return;
  }
  c["sliding_window_pattern"] = 6;
  nlohmann::json global = {{"rope_type", "default"}, {"rope_theta", f.get_float(p + "rope.freq_base").value_or(1e6)}};
  if (auto type = f.get_string(p + "rope.scaling.type"); type && *type != "none") {
    if (*type != "linear")
      unsupported(f, p + "rope.scaling.type", "rope scaling \"" + *type + "\" is not supported for gemma3",
                  "use the Hugging Face folder instead");
    global["rope_type"] = "linear";
    global["factor"] = f.get_float(p + "rope.scaling.factor").value_or(1.0);
  }
  c["rope_parameters"] = {{"full_attention", global},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
}

using FamilyReader = void (*)(const io::GgufFile&, const GgufArchitecture&, const std::string&, nlohmann::json&);

// The config keys each llama.cpp architecture records its own way; the rest read as the llama family's.
FamilyReader family_reader(std::string_view arch) {
  static const std::unordered_map<std::string_view, FamilyReader> readers = {{"gptneox", read_gpt_neox},
                                                                             {"phi3", read_phi3},
                                                                             {"bloom", read_bloom},
                                                                             {"gemma2", read_gemma},
                                                                             {"gemma3", read_gemma}};
  const auto it = readers.find(arch);
  return it == readers.end() ? read_llama_family : it->second;
}

// Tensors the converter writes for the config's sake, read by family_reader and not loaded as parameters.
bool is_config_tensor(std::string_view name) {
  return name == "rope_freqs.weight" || name == "rope_factors_long.weight" || name == "rope_factors_short.weight";
}

}  // namespace

ConfigJson gguf_config(const io::GgufFile& f) {
  const GgufArchitecture& g = gguf_architecture(f);
  const std::string arch(g.name);
  const std::string p = arch + ".";
  nlohmann::json c;
  c["architectures"] = {std::string(g.hf_architecture)};
  c["model_type"] = std::string(find_architecture(g.hf_architecture)->model_type);
  if (g.experts) {
    read_experts(f, g, p, f.require_int(p + "expert_count"), c);
  } else if (f.get_int(p + "expert_count").value_or(0) > 0) {
    unsupported(f, p + "expert_count", "a " + arch + " file with experts is not a model ferry reads",
                "use the Hugging Face folder instead");
  }
  // What every llama.cpp architecture writes alike: widths, depth, heads, context, vocabulary, a tied head.
  const int64_t heads = f.require_int(p + "attention.head_count");
  c["hidden_size"] = f.require_int(p + "embedding_length");
  c["intermediate_size"] = f.require_int(p + "feed_forward_length");
  c["num_hidden_layers"] = f.require_int(p + "block_count");
  c["num_attention_heads"] = heads;
  if (heads <= 0) unsupported(f, p + "attention.head_count", "must be positive", "the file is damaged");
  c["num_key_value_heads"] = f.get_int(p + "attention.head_count_kv").value_or(heads);
  c["max_position_embeddings"] = f.get_int(p + "context_length").value_or(2048);
  const io::GgufTensorInfo& embed = f.tensor_info("token_embd.weight");
  if (embed.dims.size() != 2) unsupported(f, "token_embd.weight", "must be 2-D", "");
  c["vocab_size"] = static_cast<int64_t>(embed.dims[1]);
  c["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;
  family_reader(g.name)(f, g, p, c);
  return ConfigJson::from_json(std::move(c), f.where());
}

DType gguf_default_dtype(const io::GgufFile& f) {
  const io::GgufTensorInfo* q = f.find_tensor("blk.0.attn_q.weight");
  if (!q) q = &f.tensor_info("token_embd.weight");
  switch (q->type) {
    case GgmlType::F16: return DType::F16;
    case GgmlType::BF16: return DType::BF16;
    default: return DType::F32;
  }
}

std::vector<GgufHfTensor> gguf_hf_tensors(const io::GgufFile& f) {
  const GgufTensorNames& names = *gguf_architecture(f).tensors;
  std::vector<GgufHfTensor> out;
  std::vector<std::string> unknown;
  for (const auto& info : f.tensors()) {
    if (is_config_tensor(info.name)) continue;
    if (const auto hf = hf_tensor_name(names, info.name)) {
      out.push_back({*hf, info});
      // Qwen2-MoE's shared expert gate is [1, C]; ggml drops trailing dims of 1, so llama.cpp's quantizer writes [C].
      if (hf->ends_with(".shared_expert_gate.weight") && info.dims.size() == 1) out.back().info.dims.push_back(1);
    } else if (const auto experts = hf_expert_names(names, info.name)) {
      if (info.dims.size() != 3)
        unsupported(f, info.name,
                    "stacked experts must be 3-D ([experts, out, in]), not " + std::to_string(info.dims.size()) + "-D",
                    "the file is damaged");
      for (int64_t k = 0; k < static_cast<int64_t>(info.dims.back()); ++k)
        out.push_back({experts->first + std::to_string(k) + experts->second, info.slice(k)});
    } else {
      unknown.push_back(info.name);
    }
  }
  if (!unknown.empty())
    throw Error("tensors with no Hugging Face counterpart: " + list_for_error(unknown), f.where(),
                "the file holds more than a " + arch_of(f) + " text model (ferry reads the text model only)");
  return out;
}

io::StateDict gguf_state_dict(const io::GgufFile& f, const ConfigJson& config) {
  (void)config;
  io::StateDict out;
  for (const GgufHfTensor& t : gguf_hf_tensors(f)) {
    try {
      out.set(t.hf_name, f.tensor(t.info));
    } catch (const Error& e) {
      throw e.with_context(t.hf_name);
    }
  }
  return out;
}

std::size_t use_gguf_storage_dtypes(nn::Module& skeleton, const io::GgufFile& f) {
  const nn::NamedTensors params = skeleton.named_parameters();
  std::unordered_map<std::string_view, const Tensor*> by_name;
  for (const auto& [name, t] : params) by_name.emplace(name, &t);
  std::size_t n = 0;
  for (const GgufHfTensor& t : gguf_hf_tensors(f)) {
    const auto dt = dtype_of_ggml(t.info.type);
    if (!dt || !is_quantized(*dt)) continue;
    const auto it = by_name.find(t.hf_name);
    if (it == by_name.end() || it->second->shape() != t.info.shape()) continue;  // loading reports these
    nn::set_module_tensor_to_device(skeleton, t.hf_name, it->second->device(),
                                    Tensor::empty(t.info.shape(), *dt, Device::meta()), *dt);
    ++n;
  }
  return n;
}

}  // namespace ferry::models
