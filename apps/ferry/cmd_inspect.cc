// ferry inspect FOLDER — what a model folder holds, without loading it.
#include <memory>

#include "cli.h"
#include "commands.h"
#include "ferry/models/model_summary.h"

namespace ferry::cli {

void add_inspect_command(CLI::App& app) {
  struct Opts {
    std::string folder;
    bool no_tensors = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("inspect", "architecture, parameter count, dtype, shards and tensors of a model folder");
  cmd->add_option("folder", o->folder, "Hugging Face model folder")->required();
  cmd->add_flag("--no-tensors", o->no_tensors, "omit the tensor table");
  cmd->callback([o] {
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
                static_cast<long long>(i.num_hidden_layers), static_cast<long long>(i.hidden_size),
                static_cast<long long>(i.num_attention_heads), static_cast<long long>(i.num_key_value_heads),
                static_cast<long long>(i.head_dim), static_cast<long long>(i.vocab_size));
    std::printf("config dtype   %s\n", s.config_dtype ? std::string(dtype_name(*s.config_dtype)).c_str() : "(none)");
    std::string stored;
    for (const auto& [dt, n] : s.stored_dtypes)
      stored += (stored.empty() ? "" : ", ") + std::string(dtype_name(dt)) + " " + std::to_string(n);
    std::printf("stored dtypes  %s (elements)\n", stored.c_str());
    std::printf("format         %s%s\n\n", s.format == io::CheckpointFormat::Safetensors ? "safetensors" : "pytorch .bin",
                s.sharded ? ", sharded" : "");
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
