// Planning from Python: ferry.init_empty_weights() (a context manager) and ferry.infer_auto_device_map.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "bindings.h"
#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/models/auto_model.h"
#include "ferry/nn/empty_weights.h"
#include "model.h"

namespace ferry::python {
namespace {

using namespace nb::literals;

// The context manager: the C++ guard lives between __enter__ and __exit__ (thread-local, like Accelerate's).
struct EmptyWeightsContext {
  bool include_buffers = false;
  std::unique_ptr<nn::InitDeviceScope> scope;
};

// A meta skeleton of the architecture config.json names, in f32 (what transformers' from_config builds).
std::shared_ptr<models::LanguageModel> skeleton_of(const models::ConfigJson& config) {
  auto guard = nn::init_empty_weights();
  return models::language_model_from_config(config, DType::F32);
}

nb::dict infer(nb::handle model_or_config, nb::handle max_memory, std::optional<std::vector<std::string>> no_split,
               nb::handle dtype, bool clean_result, bool offload_buffers, const std::string& strategy) {
  PlanOptions options;
  options.max_memory = max_memory_arg(max_memory);
  if (no_split) options.no_split_module_classes = *no_split;
  options.dtype = dtype_arg(dtype);
  options.clean_result = clean_result;
  options.offload_buffers = offload_buffers;
  if (strategy != "accelerate" && strategy != "fast")
    throw Error("unknown strategy '" + strategy + "'", "infer_auto_device_map",
                "choose \"accelerate\" (Accelerate's plan) or \"fast\" (per-token modules first)");
  options.strategy = strategy == "fast" ? PlanStrategy::Fast : PlanStrategy::Accelerate;
  std::shared_ptr<models::LanguageModel> owned;
  const models::LanguageModel* module = nullptr;
  if (nb::isinstance<Model>(model_or_config)) {
    module = nb::cast<Model&>(model_or_config).model.get();
  } else {
    owned = skeleton_of(config_arg(model_or_config));
    module = owned.get();
  }
  options.prompt_modules = module->model_info().prompt_modules;
  DeviceMap map;
  {
    nb::gil_scoped_release release;
    map = infer_auto_device_map(*module, options);
  }
  return device_map_dict(map);
}

}  // namespace

void bind_planning(nb::module_& m) {
  nb::class_<EmptyWeightsContext>(m, "_InitEmptyWeights",
                                  "The context manager ferry.init_empty_weights() returns.")
      .def("__enter__", [](EmptyWeightsContext& c) -> EmptyWeightsContext& {
        c.scope = std::make_unique<nn::InitDeviceScope>(Device::meta(), c.include_buffers);
        return c;
      }, nb::rv_policy::reference)
      .def("__exit__", [](EmptyWeightsContext& c, nb::handle, nb::handle, nb::handle) {
        c.scope.reset();
        return false;
      }, nb::arg().none(), nb::arg().none(), nb::arg().none());

  m.def("init_empty_weights", [](bool include_buffers) { return EmptyWeightsContext{include_buffers, nullptr}; },
        "include_buffers"_a = false,
        "Accelerate's init_empty_weights: models built from a config inside the `with` block get their parameters "
        "on the meta device (no memory), buffers too with include_buffers=True. Thread-local.\n\n"
        "    with ferry.init_empty_weights():\n"
        "        model = ferry.AutoModelForCausalLM.from_config(\"Llama-3-8B\")\n"
        "    ferry.infer_auto_device_map(model, max_memory={0: \"10GiB\", \"cpu\": \"30GiB\"})");

  m.def("infer_auto_device_map", &infer, "model"_a, "max_memory"_a = nb::none(),
        "no_split_module_classes"_a = nb::none(), "dtype"_a = nb::none(), "clean_result"_a = true,
        "offload_buffers"_a = false, "strategy"_a = "accelerate",
        "Accelerate's infer_auto_device_map: where each module goes (GPUs first, then cpu, then disk) within "
        "max_memory ({0: \"20GiB\", \"cpu\": \"8GiB\"}; None = what the devices have free).\n\n"
        "model: a model (a skeleton from from_config under init_empty_weights), a model folder or config.json path, "
        "or a config dict; configs are built as an f32 skeleton, as transformers' from_config does.\n"
        "no_split_module_classes: classes never split across devices, e.g. [\"LlamaDecoderLayer\"].\n"
        "dtype: the dtype weights will be loaded in (\"bfloat16\", torch.float16, ...).\n"
        "strategy: \"accelerate\" (Accelerate's order, the default) or \"fast\" (beyond Accelerate: what every "
        "generated token reads first, modules that run once per prompt such as a T5 encoder last).\n"
        "Returns the device map as Accelerate writes it: {module name: GPU index | \"cpu\" | \"disk\"}.");
}

}  // namespace ferry::python
