// ferry plan FOLDER — the device map for a budget, as a table (Accelerate's estimate-memory + infer_auto_device_map).
#include <memory>

#include "cli.h"
#include "commands.h"
#include "ferry/models/config.h"
#include "ferry/models/gguf_model.h"
#include "ferry/nn/empty_weights.h"

namespace ferry::cli {

std::shared_ptr<models::CausalLM> build_skeleton(const std::string& folder, DType dtype) {
  auto config = models::read_model_config(folder);  // config.json, or a GGUF file's metadata
  auto guard = nn::init_empty_weights();
  return models::AutoModelForCausalLM::from_config(config, dtype);
}

DType flags_dtype(const ModelFlags& f) {
  if (models::is_gguf_file(f.model))
    return f.dtype_value().value_or(models::gguf_default_dtype(io::GgufFile::open(f.model)));
  return models::resolve_dtype(models::ConfigJson::read(f.model), f.dtype_value());
}

void add_plan_command(CLI::App& app) {
  struct Opts {
    ModelFlags flags;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("plan", "plan where every layer lives for a memory budget (no weights are read)");
  o->flags.add_to(*cmd, /*positional_model=*/true);
  cmd->add_flag("--json", o->json, "print the device map in Accelerate's JSON form only");
  cmd->callback([o] {
    o->flags.apply();
    const DType dtype = flags_dtype(o->flags);
    auto skeleton = build_skeleton(o->flags.model, dtype);
    PlannedModel plan = plan_model(*skeleton, o->flags, dtype);
    if (o->json) {
      std::printf("%s\n", plan.device_map.to_json(2).c_str());
      return;
    }
    std::printf("%s (%s), %s weights\n\n", skeleton->info().architecture.c_str(), o->flags.model.c_str(),
                std::string(dtype_name(dtype)).c_str());
    print_plan(stdout, *skeleton, plan);
    print_cpu_weights(stdout, o->flags, plan);
  });
}

}  // namespace ferry::cli
