// ferry inspect FOLDER — what a model folder holds, without loading it.
#include <map>
#include <memory>

#include "cli.h"
#include "commands.h"
#include "ferry/core/error.h"
#include "ferry/io/gguf.h"
#include "ferry/models/gguf_model.h"
#include "ferry/models/model_summary.h"

namespace ferry::cli {
namespace {

// A GGUF file: header, metadata (arrays by length), the model it describes, and the tensor table in torch order.
void inspect_gguf(const std::string& path, bool no_tensors) {
  const io::GgufFile f = io::GgufFile::open(path);
  std::printf("GGUF file      %s (version %u, alignment %llu)\n", path.c_str(), f.version(),
              static_cast<unsigned long long>(f.alignment()));
  int64_t params = 0;
  uint64_t bytes = 0;
  std::map<std::string, int64_t> types;
  for (const auto& t : f.tensors()) {
    params += t.numel();
    bytes += t.nbytes;
    types[std::string(ggml_type_info(t.type).name)] += t.numel();
  }
  std::printf("parameters     %lld (%.2f B), %s of tensor data\n", static_cast<long long>(params), params / 1e9,
              format_bytes(static_cast<int64_t>(bytes)).c_str());
  std::string stored;
  for (const auto& [name, n] : types) stored += (stored.empty() ? "" : ", ") + name + " " + std::to_string(n);
  std::printf("stored types   %s (elements)\n", stored.c_str());
  std::printf("cpu kernels    %s\n", cpu_kernels_description().c_str());
  try {
    const models::ConfigJson c = models::gguf_config(f);
    std::printf("as             %s: %lld layers, hidden %lld, heads %lld (kv %lld), vocab %lld; loads as %s\n",
                c.architecture().value_or("?").c_str(), static_cast<long long>(c.require_int("num_hidden_layers")),
                static_cast<long long>(c.require_int("hidden_size")),
                static_cast<long long>(c.require_int("num_attention_heads")),
                static_cast<long long>(c.get_int("num_key_value_heads", 0)),
                static_cast<long long>(c.require_int("vocab_size")),
                std::string(dtype_name(models::gguf_default_dtype(f))).c_str());
    if (const int64_t experts = c.get_int("num_experts", 0); experts > 0)
      std::printf(
          "experts        %lld per layer, %lld routed per token (stacked ffn_*_exps: one module per expert, "
          "each its slice of the file)\n",
          static_cast<long long>(experts), static_cast<long long>(c.require_int("num_experts_per_tok")));
  } catch (const Error& e) {
    std::printf("as             (ferry cannot run it: %s)\n", e.what());
  }
  std::printf("\n");
  std::vector<std::vector<std::string>> meta{{"metadata key", "type", "value"}};
  for (const auto& [key, v] : f.metadata()) {
    std::string value = v.type == io::GgufValueType::Array
                            ? std::to_string(v.value.size()) + " × " + std::string(io::gguf_value_type_name(v.element_type))
                            : v.value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (value.size() > 60) value = value.substr(0, 57) + "...";
    meta.push_back({key, std::string(io::gguf_value_type_name(v.type)), value});
  }
  print_table(stdout, meta);
  if (no_tensors) return;
  std::printf("\n");
  std::vector<std::vector<std::string>> rows{{"tensor", "as", "type", "shape", "bytes"}};
  const std::string arch_name = f.get_string("general.architecture").value_or("");
  const models::GgufArchitecture* arch =
      models::find_gguf_architecture(arch_name, f.get_int(arch_name + ".expert_count").value_or(0) > 0);
  auto hf_name = [&](const std::string& name) -> std::string {
    if (!arch) return "-";
    if (auto hf = models::hf_tensor_name(*arch->tensors, name)) return *hf;
    if (auto experts = models::hf_expert_names(*arch->tensors, name))  // "...experts.{0..7}.w1.weight"
      return experts->first + "{0.." + std::to_string(f.tensor_info(name).dims.back() - 1) + "}" + experts->second;
    return "-";
  };
  for (const auto& t : f.tensors())
    rows.push_back({t.name, hf_name(t.name), std::string(ggml_type_info(t.type).name), shape_str(t.shape()),
                    format_bytes(static_cast<int64_t>(t.nbytes))});
  print_table(stdout, rows);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  struct Opts {
    std::string folder;
    bool no_tensors = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("inspect", "architecture, parameter count, dtype, shards and tensors of a model folder or GGUF file");
  cmd->add_option("folder", o->folder, "Hugging Face model folder, or a .gguf file")->required();
  cmd->add_flag("--no-tensors", o->no_tensors, "omit the tensor table");
  cmd->callback([o] {
    if (models::is_gguf_file(o->folder)) return inspect_gguf(o->folder, o->no_tensors);
    ModelFlags f;
    f.model = o->folder;
    f.apply();
    models::ModelSummary s = models::summarize_model(o->folder);
    const auto& i = s.info;
    std::printf("model folder   %s\n", s.folder.string().c_str());
    std::printf("architecture   %s (model_type %s, block %s)\n", i.architecture.c_str(), i.model_type.c_str(),
                i.block_class.c_str());
    std::printf("parameters     %lld (%.2f B)\n", static_cast<long long>(s.parameter_count), s.parameter_count / 1e9);
    std::printf("layers         %lld, hidden %lld, heads %lld (kv %lld), head_dim %lld, vocab %lld\n",
                static_cast<long long>(s.num_layers), static_cast<long long>(i.hidden_size),
                static_cast<long long>(i.num_attention_heads), static_cast<long long>(i.num_key_value_heads),
                static_cast<long long>(i.head_dim), static_cast<long long>(i.vocab_size));
    if (i.experts.num_experts > 0) {
      // Parameters a token uses: the dense ones and top_k of every E experts.
      int64_t expert_params = 0;
      for (const auto& t : s.tensors) {
        if (t.name.find(".experts.") == std::string::npos) continue;
        int64_t n = 1;
        for (int64_t d : t.shape) n *= d;
        expert_params += n;
      }
      const double active = static_cast<double>(s.parameter_count - expert_params) +
                            static_cast<double>(expert_params) * static_cast<double>(i.experts.experts_per_token) /
                                static_cast<double>(i.experts.num_experts);
      std::printf(
          "experts        %lld per layer, %lld routed per token, in %lld of %lld layers (%s); %.2f B of the "
          "parameters active per token\n",
          static_cast<long long>(i.experts.num_experts), static_cast<long long>(i.experts.experts_per_token),
          static_cast<long long>(i.experts.sparse_layers), static_cast<long long>(s.num_layers),
          i.experts.expert_class.c_str(), active / 1e9);
    }
    std::printf("config dtype   %s\n", s.config_dtype ? std::string(dtype_name(*s.config_dtype)).c_str() : "(none)");
    std::string stored;
    for (const auto& [dt, n] : s.stored_dtypes)
      stored += (stored.empty() ? "" : ", ") + std::string(dtype_name(dt)) + " " + std::to_string(n);
    std::printf("stored dtypes  %s (elements)\n", stored.c_str());
    std::printf("format         %s%s\n", s.format == io::CheckpointFormat::Safetensors ? "safetensors" : "pytorch .bin",
                s.sharded ? ", sharded" : "");
    std::printf("cpu kernels    %s\n\n", cpu_kernels_description().c_str());
    std::vector<std::vector<std::string>> shards{{"shard", "file size", "tensors", "tensor bytes"}};
    for (const auto& sh : s.shards)
      shards.push_back({sh.file, format_bytes(static_cast<int64_t>(sh.file_bytes)), std::to_string(sh.tensor_count),
                        format_bytes(static_cast<int64_t>(sh.tensor_bytes))});
    print_table(stdout, shards);
    if (o->no_tensors) return;
    std::printf("\n");
    std::vector<std::vector<std::string>> rows{{"tensor", "dtype", "shape", "bytes", "file"}};
    for (const auto& t : s.tensors)
      rows.push_back({t.name, std::string(dtype_name(t.dtype)), shape_str(t.shape),
                      format_bytes(static_cast<int64_t>(t.nbytes)), t.file});
    print_table(stdout, rows);
  });
}

}  // namespace ferry::cli
