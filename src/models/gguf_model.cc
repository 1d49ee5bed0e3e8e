// GGUF -> HF config, names and tensors (see include/ferry/models/gguf_model.h).
#include "ferry/models/gguf_model.h"

#include <cstring>
#include <fstream>
#include <algorithm>

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
  const GgufArchitecture* g = find_gguf_architecture(arch);
  if (!g)
    unsupported(f, "general.architecture", "GGUF architecture \"" + arch + "\" is not supported",
                "ferry reads llama (Llama, Mistral), qwen2 and qwen3 GGUF files; use the Hugging Face folder instead");
  return *g;
}

ConfigJson gguf_config(const io::GgufFile& f) {
  const GgufArchitecture& g = gguf_architecture(f);
  const std::string arch(g.name);
  const std::string p = arch + ".";
  nlohmann::json c;
  c["architectures"] = {std::string(g.hf_architecture)};
  c["model_type"] = arch;
  const int64_t hidden = f.require_int(p + "embedding_length");
  const int64_t heads = f.require_int(p + "attention.head_count");
  c["hidden_size"] = hidden;
  c["intermediate_size"] = f.require_int(p + "feed_forward_length");
  c["num_hidden_layers"] = f.require_int(p + "block_count");
  c["num_attention_heads"] = heads;
  c["num_key_value_heads"] = f.get_int(p + "attention.head_count_kv").value_or(heads);
  c["max_position_embeddings"] = f.get_int(p + "context_length").value_or(2048);
  if (auto eps = f.get_float(p + "attention.layer_norm_rms_epsilon")) c["rms_norm_eps"] = *eps;
  c["rope_theta"] = f.get_float(p + "rope.freq_base").value_or(10000.0);
  const int64_t head_dim = f.get_int(p + "attention.key_length").value_or(heads > 0 ? hidden / heads : 0);
  c["head_dim"] = head_dim;
  if (auto rot = f.get_int(p + "rope.dimension_count"); rot && *rot != head_dim)
    unsupported(f, p + "rope.dimension_count",
                "partial rotary embeddings (" + std::to_string(*rot) + " of head_dim " + std::to_string(head_dim) +
                    ") are not supported for " + arch,
                "use the Hugging Face folder instead");
  if (f.find_tensor("rope_freqs.weight"))
    unsupported(f, "rope_freqs.weight", "llama 3 rope frequency factors are not supported yet for GGUF files",
                "use the Hugging Face folder (config.json's rope_scaling) instead");
  if (auto type = f.get_string(p + "rope.scaling.type"); type && *type != "none") {
    if (*type != "linear")
      unsupported(f, p + "rope.scaling.type", "rope scaling \"" + *type + "\" is not supported for GGUF files",
                  "use the Hugging Face folder instead");
    c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", f.get_float(p + "rope.scaling.factor").value_or(1.0)}};
  }
  const io::GgufTensorInfo& embed = f.tensor_info("token_embd.weight");
  if (embed.dims.size() != 2) unsupported(f, "token_embd.weight", "must be 2-D", "");
  c["vocab_size"] = static_cast<int64_t>(embed.dims[1]);
  c["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;
  if (g.interleaved_qk_rows) {
    // llama.cpp's converter interleaves each head's q/k rows; attention rotates adjacent pairs to match (see
    // LlamaConfig::rope_layout), so the weights stay as the file holds them.
    c["rope_interleaved"] = true;
    c["attention_bias"] = f.find_tensor("blk.0.attn_q.bias") != nullptr;
    c["mlp_bias"] = f.find_tensor("blk.0.ffn_up.bias") != nullptr;
  } else {
    c["use_sliding_window"] = false;
    c["attention_bias"] = f.find_tensor("blk.0.attn_q.bias") != nullptr;  // qwen3 (qwen2 always has q/k/v biases)
  }
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

io::StateDict gguf_state_dict(const io::GgufFile& f, const ConfigJson& config) {
  (void)config;
  const GgufTensorNames& names = *gguf_architecture(f).tensors;
  io::StateDict out;
  std::vector<std::string> unknown;
  for (const auto& info : f.tensors()) {
    const auto hf = hf_tensor_name(names, info.name);
    if (!hf) {
      unknown.push_back(info.name);
      continue;
    }
    Tensor t;
    try {
      t = f.tensor(info.name);
    } catch (const Error& e) {
      throw e.with_context(*hf);
    }
    out.set(*hf, t);
  }
  if (!unknown.empty())
    throw Error("tensors with no Hugging Face counterpart: " + list_for_error(unknown), f.where(),
                "the file holds more than a " + arch_of(f) + " text model (ferry reads the text model only)");
  return out;
}

std::size_t use_gguf_storage_dtypes(nn::Module& skeleton, const io::GgufFile& f) {
  const nn::NamedTensors params = skeleton.named_parameters();
  const GgufTensorNames& names = *gguf_architecture(f).tensors;
  std::size_t n = 0;
  for (const auto& info : f.tensors()) {
    const auto dt = dtype_of_ggml(info.type);
    const auto hf = hf_tensor_name(names, info.name);
    if (!dt || !is_quantized(*dt) || !hf) continue;
    const auto it = std::find_if(params.begin(), params.end(), [&](const auto& p) { return p.first == *hf; });
    if (it == params.end() || it->second.shape() != info.shape()) continue;  // loading reports these
    nn::set_module_tensor_to_device(skeleton, *hf, it->second.device(),
                                    Tensor::empty(info.shape(), *dt, Device::meta()), *dt);
    ++n;
  }
  return n;
}

}  // namespace ferry::models
