// The auto-model factory: config.json -> architecture -> skeleton (under init_empty_weights) -> weights.
//
// Plans other than "everything on the cpu" belong to big_modeling's load_checkpoint_and_dispatch; until that exists
// (include/ferry/big_modeling/dispatch.h), from_pretrained refuses them with an error that says so.
#include "ferry/models/auto_model.h"

#include <functional>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/io/checkpoint.h"
#include "ferry/models/gpt2.h"
#include "ferry/models/gptj.h"
#include "ferry/models/llama.h"
#include "ferry/nn/empty_weights.h"
#include "resident_loading.h"

namespace ferry::models {

namespace {

using Factory = std::function<std::shared_ptr<CausalLM>(const ConfigJson&, DType)>;

struct Architecture {
  const char* name;
  const char* model_type;
  Factory make;
};

const std::vector<Architecture>& registry() {
  static const std::vector<Architecture> table = {
      {"LlamaForCausalLM", "llama",
       [](const ConfigJson& c, DType d) { return make_llama_family(c, "LlamaForCausalLM", d); }},
      {"MistralForCausalLM", "mistral",
       [](const ConfigJson& c, DType d) { return make_llama_family(c, "MistralForCausalLM", d); }},
      {"Qwen2ForCausalLM", "qwen2",
       [](const ConfigJson& c, DType d) { return make_llama_family(c, "Qwen2ForCausalLM", d); }},
      {"GPT2LMHeadModel", "gpt2", make_gpt2},
      {"GPTJForCausalLM", "gptj", make_gptj},
  };
  return table;
}

const Architecture* find_architecture(const std::string& name) {
  for (const Architecture& a : registry())
    if (name == a.name) return &a;
  return nullptr;
}

std::string supported_list() {
  std::string s;
  for (const Architecture& a : registry()) s += std::string(s.empty() ? "" : ", ") + a.name + " (" + a.model_type + ")";
  return s;
}

}  // namespace

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const Architecture& a : registry()) names.emplace_back(a.name);
  return names;
}

std::string resolve_architecture(const ConfigJson& config) {
  const std::optional<std::string> named = config.architecture();
  if (named && find_architecture(*named)) return *named;
  const std::string model_type = config.model_type();
  for (const Architecture& a : registry()) {
    if (model_type == a.model_type) {
      if (named) log_info("{}: architectures[0] is {}; loading {} for model_type \"{}\"", config.where(), *named, a.name,
                          model_type);
      return a.name;
    }
  }
  config.fail("unknown architecture: architectures[0] = " + (named ? "\"" + *named + "\"" : std::string("(absent)")) +
                  ", model_type = " + (model_type.empty() ? std::string("(absent)") : "\"" + model_type + "\""),
              "ferry implements " + supported_list() + ".");
}

DType resolve_dtype(const ConfigJson& config, std::optional<DType> requested) {
  const DType dtype = requested ? *requested : config.dtype().value_or(DType::F32);
  if (!is_floating_point(dtype))
    throw Error("cannot load weights as " + std::string(dtype_name(dtype)), config.where(),
                "Choose a floating-point dtype: f32, f16, bf16 (or an f8 type).");
  return dtype;
}

bool is_resident_cpu_map(const std::variant<std::monostate, std::string, DeviceMap>& device_map) {
  if (std::holds_alternative<std::monostate>(device_map)) return true;
  if (const auto* mode = std::get_if<std::string>(&device_map)) return *mode == "cpu";
  const DeviceMap& map = std::get<DeviceMap>(device_map);
  const std::vector<Device> devices = map.devices();
  return devices.size() == 1 && devices[0].is_cpu();
}

std::shared_ptr<CausalLM> AutoModelForCausalLM::from_config(const ConfigJson& config, DType dtype) {
  const std::string architecture = resolve_architecture(config);
  try {
    return find_architecture(architecture)->make(config, dtype);
  } catch (const Error& e) {
    throw e.with_context(architecture);
  }
}

std::shared_ptr<CausalLM> AutoModelForCausalLM::from_pretrained(const std::filesystem::path& folder,
                                                                const FromPretrainedOptions& options) {
  // Everything that can be checked without reading weights is checked first.
  const ConfigJson config = ConfigJson::read(folder);
  const DType dtype = resolve_dtype(config, options.dtype);
  resolve_architecture(config);
  const io::CheckpointFiles files = io::get_checkpoint_shard_files(folder);

  std::shared_ptr<CausalLM> model;
  {
    auto guard = nn::init_empty_weights();
    model = from_config(config, dtype);
  }
  if (is_resident_cpu_map(options.device_map)) {
    detail::load_resident_weights(*model, files);
    return model;
  }
  // The seam for big_modeling: plan (modes) -> load into the plan -> dispatch, once dispatch.h exists.
  throw Error("device_map other than \"cpu\" needs big_modeling's load_checkpoint_and_dispatch, which this build "
              "does not have yet",
              folder.string(), "Load resident (leave device_map unset), or dispatch the model yourself.");
}

}  // namespace ferry::models
