// export_gguf (see include/ferry/models/gguf_model.h): a llama-family or qwen2 model, from a Hugging Face folder or
// a GGUF file, written as a GGUF llama.cpp loads — the inverse of gguf_config / hf_tensor_name (plus llama.cpp's
// q/k row order for HF sources),
// with the weights quantized one tensor at a time while the file is written (peak memory: one tensor).
#include <algorithm>
#include <cstring>
#include <map>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/io/checkpoint.h"
#include "ferry/io/gguf_writer.h"
#include "ferry/models/gguf_model.h"
#include "ferry/nn/rotary.h"
#include "ferry/ops/rotary.h"

namespace ferry::models {
namespace {

// llama.cpp's llama_ftype numbers (general.file_type) and the base block type of each mix ferry writes.
struct FileType {
  std::string_view name;
  uint32_t ftype;
  DType base;
};
constexpr FileType kFileTypes[] = {
    {"f32", 0, DType::F32},      {"f16", 1, DType::F16},      {"bf16", 32, DType::BF16},
    {"q8_0", 7, DType::Q8_0},    {"q4_0", 2, DType::Q4_0},    {"q4_1", 3, DType::Q4_1},
    {"q5_0", 8, DType::Q5_0},    {"q5_1", 9, DType::Q5_1},    {"q6_k", 18, DType::Q6_K},
    {"q4_k_m", 15, DType::Q4_K}, {"q5_k_m", 17, DType::Q5_K},
};

const FileType& file_type(const std::string& name) {
  for (const auto& t : kFileTypes)
    if (t.name == name) return t;
  std::string names;
  for (const auto& t : kFileTypes) names += (names.empty() ? "" : ", ") + std::string(t.name);
  throw Error("unknown GGUF type '" + name + "'", "--type", "use one of " + names);
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third in between get more bits in
// its _M mixes (for attn_v and ffn_down).
bool more_bits(int64_t layer, int64_t layers) {
  return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

// The block type of one tensor in the mix: norms and other 1-D tensors stay f32; the _M mixes put output.weight
// and the attn_v / ffn_down of more_bits layers in q6_k; rows that are not whole blocks fall back to q8_0 (32
// elements) or f16.
// A stacked experts tensor ([E, out, in]) is typed by one expert's [out, in]. Routers (ffn_gate_inp, and Qwen2-MoE's
// shared-expert gate ffn_gate_inp_shexp) stay f32, as llama.cpp's quantizer leaves them.
DType tensor_dtype(const FileType& ft, const std::string& gguf_name, Shape shape, int64_t layers) {
  if (shape.size() == 3) shape.erase(shape.begin());
  if (shape.size() != 2 || gguf_name.find(".ffn_gate_inp") != std::string::npos) return DType::F32;
  DType d = ft.base;
  if (ft.ftype == 15 || ft.ftype == 17) {
    if (gguf_name == "output.weight") d = DType::Q6_K;
    const bool v_or_down = gguf_name.find(".attn_v.") != std::string::npos ||
                           gguf_name.find(".ffn_down.") != std::string::npos ||
                           gguf_name.find(".ffn_down_exps.") != std::string::npos;
    if (v_or_down && gguf_name.rfind("blk.", 0) == 0 && more_bits(std::stoll(gguf_name.substr(4)), layers))
      d = DType::Q6_K;
  }
  if (shape[1] % dtype_block_size(d) == 0) return d;
  return shape[1] % 32 == 0 && is_quantized(d) ? DType::Q8_0 : DType::F16;
}

// HF's rotate-half q/k row order -> llama.cpp's interleaved pairs: HF row h·D + j·D/2 + i is row h·D + 2i + j of
// the file.
Tensor permute_rows(const Tensor& t, int64_t heads) {
  const int64_t rows = t.size(0);
  if (heads <= 0 || rows % heads != 0 || (rows / heads) % 2 != 0)
    throw Error("cannot put q/k rows in llama.cpp's order: " + std::to_string(rows) + " rows for " +
                std::to_string(heads) + " heads");
  const int64_t D = rows / heads, half = D / 2;
  const std::size_t row_bytes = t.nbytes() / static_cast<std::size_t>(rows);
  Tensor out = Tensor::empty(t.shape(), t.dtype());
  const auto* src = static_cast<const uint8_t*>(t.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::memcpy(dst + static_cast<std::size_t>(h * D + 2 * i + j) * row_bytes,
                    src + static_cast<std::size_t>(h * D + j * half + i) * row_bytes, row_bytes);
  return out;
}

// config.json -> llama.cpp's <arch>.* keys (what gguf_config reads back).
void write_config(io::GgufWriter& w, const ConfigJson& c, const std::string& arch) {
  const std::string p = arch + ".";
  const int64_t hidden = c.require_int("hidden_size"), heads = c.require_int("num_attention_heads");
  const int64_t head_dim = c.get_int("head_dim", hidden / heads);
  auto u32 = [](int64_t v) { return io::gguf_u32(static_cast<uint32_t>(v)); };
  w.set(p + "context_length", u32(c.get_int("max_position_embeddings", 2048)));
  w.set(p + "embedding_length", u32(hidden));
  w.set(p + "block_count", u32(c.require_int("num_hidden_layers")));
  w.set(p + "feed_forward_length", u32(c.require_int("intermediate_size")));
  w.set(p + "attention.head_count", u32(heads));
  w.set(p + "attention.head_count_kv", u32(c.get_int("num_key_value_heads", heads)));
  w.set(p + "attention.layer_norm_rms_epsilon", io::gguf_f32(static_cast<float>(c.get_float("rms_norm_eps", 1e-6))));
  w.set(p + "rope.freq_base",
        io::gguf_f32(static_cast<float>(c.rope_parameters(c.get_int("max_position_embeddings", 2048)).rope_theta)));
  w.set(p + "rope.dimension_count", u32(head_dim));
  if (head_dim != hidden / heads) {
    w.set(p + "attention.key_length", u32(head_dim));
    w.set(p + "attention.value_length", u32(head_dim));
  }
  w.set(p + "vocab_size", u32(c.require_int("vocab_size")));
  const nlohmann::json& j = c.json();
  if (const int64_t experts = c.get_int("num_local_experts", c.get_int("num_experts", 0)); experts > 0) {
    // What llama.cpp's mixtral / qwen2moe / qwen3moe compute: every layer sparse, its fixed top-k normalisation.
    const bool mixtral = c.model_type() == "mixtral";
    const bool normalizes = mixtral || c.get_bool("norm_topk_prob", false);
    if (normalizes != find_gguf_architecture(arch)->moe_normalizes_top_k)
      throw Error(std::string("llama.cpp's ") + arch + (normalizes ? " does not renormalise" : " renormalises") +
                      " the top-k router weights, and a GGUF cannot say otherwise",
                  c.where() + ": norm_topk_prob", "run the Hugging Face folder instead");
    if ((j.contains("mlp_only_layers") && !j["mlp_only_layers"].empty()) || c.get_int("decoder_sparse_step", 1) != 1)
      throw Error("llama.cpp's " + arch + " has no dense layers between sparse ones", c.where() + ": mlp_only_layers",
                  "run the Hugging Face folder instead");
    w.set(p + "expert_count", u32(experts));
    w.set(p + "expert_used_count", u32(c.require_int("num_experts_per_tok")));
    if (!mixtral) w.set(p + "expert_feed_forward_length", u32(c.require_int("moe_intermediate_size")));
    if (const int64_t shared = c.get_int("shared_expert_intermediate_size", 0); !mixtral && shared > 0)
      w.set(p + "expert_shared_feed_forward_length", u32(shared));
  }
  const nn::RopeParameters rope = c.rope_parameters(c.get_int("max_position_embeddings", 2048));
  if (rope.rope_type == "llama3" || rope.rope_type == "frequency_factors") {
    // llama.cpp keeps Llama 3's scaling as one divisor per frequency (rope_freqs), as its converter writes it.
    const auto plain = ops::rope_inv_freq(head_dim, rope.rope_theta).to_vector<float>();
    const auto scaled = nn::rope_inverse_frequencies(head_dim, rope).to_vector<float>();
    std::vector<float> factors(plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i) factors[i] = plain[i] / scaled[i];
    if (rope.rope_type == "frequency_factors")  // from a GGUF: the file's own factors, bit for bit
      for (std::size_t i = 0; i < plain.size(); ++i) factors[i] = static_cast<float>(rope.frequency_factors[i]);
    const Shape shape{static_cast<int64_t>(factors.size())};
    w.add_tensor("rope_freqs.weight", shape, DType::F32,
                 [factors, shape] { return Tensor::from_vector(factors, shape); });
  } else if (rope.rope_type == "linear") {
    w.set(p + "rope.scaling.type", io::gguf_string("linear"));
    w.set(p + "rope.scaling.factor", io::gguf_f32(static_cast<float>(rope.factor)));
  } else if (rope.rope_type != "default") {
    throw Error("rope type \"" + rope.rope_type + "\" cannot be written to GGUF by ferry yet", c.where(),
                "export a model without rope scaling, or use llama.cpp's convert_hf_to_gguf.py");
  }
}

}  // namespace

GgufExportReport export_gguf(const std::filesystem::path& source, const std::filesystem::path& out,
                             const GgufExportOptions& options) {
  const FileType& ft = file_type(options.type);
  const bool from_gguf = is_gguf_file(source);
  std::optional<io::GgufFile> gguf;
  if (from_gguf) gguf = io::GgufFile::open(source);
  const ConfigJson config = from_gguf ? gguf_config(*gguf) : ConfigJson::read(source);
  const std::string model_type = config.model_type();
  const Architecture& family = architecture_for(config);
  // The llama family's GGUF layout (write_config's keys); ferry reads more architectures than it writes.
  constexpr std::string_view kWritten[] = {"llama", "qwen2", "qwen3", "qwen2moe", "qwen3moe"};
  if (!family.gguf || std::find(std::begin(kWritten), std::end(kWritten), family.gguf->name) == std::end(kWritten))
    throw Error(
        "ferry writes GGUF files of llama, mistral, mixtral, qwen2, qwen3, qwen2_moe and qwen3_moe models, not \"" +
            model_type + "\"",
        source.string(), "use llama.cpp's convert_hf_to_gguf.py for other architectures");
  const std::string arch(family.gguf->name);
  const GgufTensorNames& gguf_names = *family.gguf->tensors;
  const nlohmann::json& cj = config.json();
  const bool sliding = cj.contains("sliding_window") && cj["sliding_window"].is_number_integer() &&
                       (model_type == "mistral" || cj.value("use_sliding_window", false));
  if (sliding)
    log_warning("{}: sliding-window attention ({} tokens) has no key in a {} GGUF: llama.cpp and ferry attend to the "
                "whole context when running the file (the same up to that length)",
                source.string(), cj["sliding_window"].get<int64_t>(), arch);
  const int64_t layers = config.require_int("num_hidden_layers");
  const int64_t heads = config.require_int("num_attention_heads");
  const int64_t kv_heads = config.get_int("num_key_value_heads", heads);

  // Every source tensor under its HF name (zero-copy views where the format allows; each holds its storage).
  std::map<std::string, Tensor> tensors;
  if (from_gguf) {
    for (const auto& [name, t] : gguf_state_dict(*gguf, config)) tensors[name] = t;
  } else {
    for (const auto& shard : io::get_checkpoint_shard_files(source).shards)
      for (const auto& [name, t] : io::load_state_dict(shard)) tensors[name] = t;
  }

  // A tied head is the embedding (llama.cpp reads a file without output.weight that way).
  const bool tied = config.get_bool("tie_word_embeddings", false) || !tensors.count("lm_head.weight");
  io::GgufWriter w;
  w.set("general.architecture", io::gguf_string(arch));
  w.set("general.name", io::gguf_string(options.name.empty() ? source.stem().string() : options.name));
  w.set("general.file_type", io::gguf_u32(ft.ftype));
  if (is_quantized(ft.base)) w.set("general.quantization_version", io::gguf_u32(2));
  write_config(w, config, arch);

  GgufExportReport report;
  if (from_gguf) {  // the vocabulary as it was
    for (const auto& [key, value] : gguf->metadata())
      if (key.rfind("tokenizer.", 0) == 0) w.set(key, value);
    report.tokenizer = "copied from " + source.filename().string();
  } else {
    const auto tok = gguf_tokenizer_metadata(source, config);
    for (const auto& [key, value] : tok.metadata) w.set(key, value);
    report.tokenizer = tok.description;
  }
  if (!options.chat_template.empty()) w.set("tokenizer.chat_template", io::gguf_string(options.chat_template));

  // Tensors in llama.cpp's order: embedding, blocks, final norm, head. A layer's experts go into one stacked tensor
  // per projection, expert k at slice k (each expert contiguous: one sequential read when it is offloaded).
  std::vector<std::pair<std::string, std::string>> order;   // gguf name, hf name ("" for stacked experts)
  std::map<std::string, std::vector<std::string>> stacked;  // gguf name -> hf name of expert k at k
  for (const auto& [hf, t] : tensors) {
    if (hf.find("rotary_emb.inv_freq") != std::string::npos) continue;  // recomputed from the config
    if (hf == "lm_head.weight" && tied) continue;
    if (const auto expert = gguf_expert_name(gguf_names, hf)) {
      auto& slot = stacked[expert->first];
      if (slot.empty()) order.emplace_back(expert->first, "");
      if (static_cast<int64_t>(slot.size()) <= expert->second)
        slot.resize(static_cast<std::size_t>(expert->second) + 1);
      slot[static_cast<std::size_t>(expert->second)] = hf;
      continue;
    }
    const auto name = gguf_tensor_name(gguf_names, hf);
    if (!name)
      throw Error("tensor has no GGUF name", source.string() + ": " + hf,
                  "the checkpoint holds more than a " + arch + " text model");
    order.emplace_back(*name, hf);
  }
  const int64_t num_experts = config.get_int("num_local_experts", config.get_int("num_experts", 0));
  for (const auto& [name, experts] : stacked) {
    const auto missing = std::find(experts.begin(), experts.end(), std::string());
    if (static_cast<int64_t>(experts.size()) != num_experts || missing != experts.end())
      throw Error("the experts of " + name + " are not experts 0.." + std::to_string(num_experts - 1) +
                      (missing != experts.end()
                           ? " (expert " + std::to_string(missing - experts.begin()) + " is missing)"
                           : " (" + std::to_string(experts.size()) + " found)"),
                  source.string(), "is the checkpoint complete?");
    for (const std::string& hf : experts)
      if (tensors.at(hf).shape() != tensors.at(experts.front()).shape())
        throw Error("experts of one layer differ in shape", source.string() + ": " + hf, "is the checkpoint damaged?");
  }
  auto rank = [](const std::string& g) -> std::pair<int64_t, std::string> {
    if (g.rfind("token_embd.", 0) == 0) return {-1, g};
    if (g.rfind("blk.", 0) == 0) return {std::stoll(g.substr(4)), g};
    return {1LL << 40, g == "output_norm.weight" ? "0" : g};
  };
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });
  for (const auto& [name, hf] : order) {
    if (hf.empty()) {  // stacked experts: each expert converted on its own, its bytes at slice k
      std::vector<Tensor> experts;
      for (const std::string& e : stacked.at(name)) experts.push_back(tensors.at(e));
      Shape shape = experts.front().shape();
      shape.insert(shape.begin(), static_cast<int64_t>(experts.size()));
      const DType target = tensor_dtype(ft, name, shape, layers);
      w.add_tensor(name, shape, target, [experts, shape, target] {
        Tensor out = Tensor::empty(shape, target);
        const std::size_t each = out.nbytes() / experts.size();
        auto* dst = static_cast<uint8_t*>(out.raw_data());
        for (std::size_t k = 0; k < experts.size(); ++k) {
          const Tensor& e = experts[k];
          const Tensor t = e.dtype() == target
                               ? e
                               : e.to(Device::cpu(), is_quantized(e.dtype()) ? DType::F32 : e.dtype()).to(target);
          std::memcpy(dst + k * each, t.raw_data(), each);
        }
        return out;
      });
      ++report.tensors_per_type[std::string(dtype_name(target))];
      report.bytes += dtype_nbytes(target, shape_numel(shape));
      continue;
    }
    const Tensor src = tensors.at(hf);
    const DType target = tensor_dtype(ft, name, src.shape(), layers);
    // HF folders hold q/k in rotate-half order; a GGUF source already in llama.cpp's.
    const bool permute = !from_gguf && family.gguf->interleaved_qk_rows && (hf.find(".self_attn.q_proj.") != std::string::npos ||
                                                            hf.find(".self_attn.k_proj.") != std::string::npos);
    const int64_t h = hf.find(".q_proj.") != std::string::npos ? heads : kv_heads;
    w.add_tensor(name, src.shape(), target, [src, target, permute, h] {
      Tensor t = src.dtype() == target ? src : src.to(Device::cpu(), is_quantized(src.dtype()) ? DType::F32 : src.dtype());
      if (permute) t = permute_rows(t, h);
      return t.to(target);
    });
    ++report.tensors_per_type[std::string(dtype_name(target))];
    report.bytes += dtype_nbytes(target, shape_numel(src.shape()));
  }
  w.write(out);
  return report;
}

}  // namespace ferry::models
