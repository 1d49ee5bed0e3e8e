// ferry plan FOLDER — the device map for a budget, as a table (Accelerate's estimate-memory + infer_auto_device_map).
#include <algorithm>
#include <map>
#include <memory>

#include "cli.h"
#include "commands.h"
#include "ferry/big_modeling/quantize.h"
#include "ferry/models/config.h"
#include "ferry/models/gguf_model.h"
#include "ferry/nn/empty_weights.h"

namespace ferry::cli {

std::shared_ptr<models::LanguageModel> build_skeleton(const std::string& folder, DType dtype) {
  auto config = models::read_model_config(folder);  // config.json, or a GGUF file's metadata
  auto guard = nn::init_empty_weights();
  return models::language_model_from_config(config, dtype);
}

std::shared_ptr<models::LanguageModel> build_skeleton(const ModelFlags& flags, DType dtype) {
  std::shared_ptr<models::LanguageModel> skeleton = build_skeleton(flags.model, dtype);
  if (const auto q = flags.quantize_value()) quantize_weights(*skeleton, *q);
  else if (models::is_gguf_file(flags.model) && !flags.dtype_value())
    models::use_gguf_storage_dtypes(*skeleton, io::GgufFile::open(flags.model));
  return skeleton;
}

std::string weights_dtypes(const nn::Module& model) {
  std::map<DType, int64_t> bytes;
  for (const auto& [name, t] : model.named_parameters()) bytes[t.dtype()] += static_cast<int64_t>(t.nbytes());
  std::vector<std::pair<int64_t, DType>> order;
  for (const auto& [dt, n] : bytes) order.emplace_back(n, dt);
  std::sort(order.rbegin(), order.rend());
  std::string out;
  for (const auto& [n, dt] : order) out += (out.empty() ? "" : " + ") + std::string(dtype_name(dt));
  return out;
}

DType flags_dtype(const ModelFlags& f) {
  if (models::is_gguf_file(f.model))
    return f.dtype_value().value_or(models::gguf_default_dtype(io::GgufFile::open(f.model)));
  return models::resolve_dtype(models::ConfigJson::read(f.model), f.dtype_value());
}

void add_plan_command(CLI::App& app) {
  struct Opts {
    ModelFlags flags;
    bool json = false, json_details = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("plan", "plan where every layer lives for a memory budget (no weights are read)");
  o->flags.add_to(*cmd, /*positional_model=*/true);
  cmd->add_flag("--json", o->json, "print the device map in Accelerate's JSON form only");
  cmd->add_flag("--json-details", o->json_details,
                "print {device_map, reservations: [{device, bytes, reason}], offload_io, staging_bytes} as JSON: the "
                "map and why it differs from Accelerate's plan for the same budget");
  cmd->callback([o] {
    o->flags.apply();
    const DType dtype = flags_dtype(o->flags);
    const auto skeleton = build_skeleton(o->flags, dtype);
    PlannedModel plan = plan_model(*skeleton, o->flags, dtype);
    if (o->json) {
      std::printf("%s\n", plan.device_map.to_json(2).c_str());
      return;
    }
    if (o->json_details) {
      nlohmann::json reservations = nlohmann::json::array();
      for (const Reservation& r : plan.options.reservations)
        reservations.push_back({{"device", r.device.str()}, {"bytes", r.bytes}, {"reason", r.purpose}});
      const nlohmann::json j{{"device_map", nlohmann::json::parse(plan.device_map.to_json())},
                             {"reservations", reservations},
                             {"offload_io", to_string(plan.offload.io)},
                             {"staging_bytes", plan.offload.staging_bytes}};
      std::printf("%s\n", j.dump(2).c_str());
      return;
    }
    std::printf("%s (%s), %s weights\n\n", skeleton->model_info().architecture.c_str(),
                o->flags.model.c_str(), weights_dtypes(*skeleton).c_str());
    print_plan(stdout, *skeleton, plan);
    print_cpu_weights(stdout, o->flags, plan);
  });
}

}  // namespace ferry::cli
