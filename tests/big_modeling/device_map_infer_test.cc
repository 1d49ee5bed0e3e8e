// infer_auto_device_map: Accelerate's test_modeling_utils.py cases, ported exactly (test_infer_auto_device_map,
// _with_tied_weights, _with_buffer_check(_and_multi_devices), _with_fallback_allocation*, test_get_module_size_
// with_ties), plus the cases where ferry departs from Accelerate on purpose.
#include <gtest/gtest.h>

#include "big_modeling/device_map/planner.h"  // size_with_ties (Accelerate: get_module_size_with_ties)
#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/core/logging.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/norm.h"
#include "ferry/nn/tied.h"
#include "support/model_for_test.h"

namespace ferry {
namespace {

using test::ModelForTest;
using Named = std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>;

DeviceMap J(const char* json) { return DeviceMap::from_json(json); }

PlanOptions budget(const char* max_memory_json) {
  PlanOptions o;
  o.max_memory = MaxMemory::from_json(max_memory_json);
  return o;
}

void tie(nn::Module& root, const std::string& dst_module, const std::string& src_module, const char* param = "weight") {
  root.get_submodule(dst_module).register_parameter(param, root.get_submodule(src_module).parameter_slot(param));
}

std::shared_ptr<nn::Sequential> three_models() {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<ModelForTest>(), std::make_shared<ModelForTest>(), std::make_shared<ModelForTest>()});
}

TEST(InferAutoDeviceMap, ModelForTest) {
  ModelForTest model;
  {
    ScopedLogCapture logs;
    // Only linear1 fits on device 0: it keeps room for the largest layer (linear2, 100) in case of offload.
    EXPECT_EQ(infer_auto_device_map(model, budget(R"({"0": 200, "1": 200})")),
              J(R"({"linear1": 0, "batchnorm": 1, "linear2": 1})"));
    EXPECT_FALSE(logs.contains("insufficient memory"));
  }
  // Device 1 keeps no reserve, so batchnorm + linear2 (172) fit there exactly.
  EXPECT_EQ(infer_auto_device_map(model, budget(R"({"0": 200, "1": 172, "2": 200})")),
            J(R"({"linear1": 0, "batchnorm": 1, "linear2": 1})"));
}

TEST(InferAutoDeviceMap, TyingWeightsLetsTheWholeModelFit) {
  ModelForTest model;
  tie(model, "linear1", "linear2");  // linear1.weight = linear2.weight, as Accelerate's test does
  EXPECT_EQ(infer_auto_device_map(model, budget(R"({"0": 200, "1": 200})")), J(R"({"": 0})"));
}

TEST(InferAutoDeviceMap, SplitsAtTheLayerLevelUnlessNoSplit) {
  EXPECT_EQ(infer_auto_device_map(*three_models(), budget(R"({"0": 500, "1": 500})")),
            J(R"({"0": 0, "1.linear1": 0, "1.batchnorm": 0, "1.linear2": 1, "2": 1})"));
  PlanOptions o = budget(R"({"0": 500, "1": 500})");
  o.no_split_module_classes = {"ModelForTest"};
  EXPECT_EQ(infer_auto_device_map(*three_models(), o), J(R"({"0": 0, "1": 1, "2": 1})"));
}

std::shared_ptr<nn::Sequential> three_named_layers() {
  return std::make_shared<nn::Sequential>(Named{{"layer1", std::make_shared<ModelForTest>()},
                                                {"layer2", std::make_shared<ModelForTest>()},
                                                {"layer3", std::make_shared<ModelForTest>()}});
}

TEST(InferAutoDeviceMap, TiedWeights) {
  auto model = three_named_layers();
  tie(*model, "layer3.linear2", "layer1.linear2");
  EXPECT_EQ(infer_auto_device_map(*model, budget(R"({"0": 400, "1": 500})")),
            J(R"({"layer1": 0, "layer3.linear2": 0, "layer2": 1, "layer3.linear1": 1, "layer3.batchnorm": 1})"));

  // Three weights tied together.
  tie(*model, "layer2.linear2", "layer1.linear2");
  EXPECT_EQ(infer_auto_device_map(*model, budget(R"({"0": 400, "1": 500})")),
            J(R"({"layer1": 0, "layer2.linear2": 0, "layer3.linear2": 0, "layer2.linear1": 1,
                  "layer2.batchnorm": 1, "layer3.linear1": 1, "layer3.batchnorm": 1})"));

  // Two groups of tied weights.
  tie(*model, "layer2.linear1", "layer1.linear1");
  EXPECT_EQ(infer_auto_device_map(*model, budget(R"({"0": 400, "1": 500})")),
            J(R"({"layer1": 0, "layer2.linear1": 0, "layer2.linear2": 0, "layer3.linear2": 0,
                  "layer2.batchnorm": 1, "layer3.linear1": 1, "layer3.batchnorm": 1})"));
}

TEST(InferAutoDeviceMap, TiedWeightsInsideOneContainer) {
  auto model = std::make_shared<nn::Sequential>(Named{{"linear1", std::make_shared<nn::Linear>(4, 4)},
                                                      {"linear2", std::make_shared<nn::Linear>(6, 6)},
                                                      {"linear3", std::make_shared<nn::Linear>(4, 4)},
                                                      {"linear4", std::make_shared<nn::Linear>(6, 6)}});
  tie(*model, "linear3", "linear1", "weight");
  tie(*model, "linear3", "linear1", "bias");
  EXPECT_EQ(infer_auto_device_map(*model, budget(R"({"0": 250, "1": 400})")),
            J(R"({"linear1": 0, "linear2": 1, "linear3": 0, "linear4": 1})"));
}

// `compute.weight` is tied to `compute.weight_submodule.parameter`: a name that extends another by more than a
// dot-free suffix must still count as outside it. Accelerate only asserts that this does not crash.
class LinearModuleAndSubModule : public nn::Linear {
 public:
  LinearModuleAndSubModule(int64_t in, int64_t out) : nn::Linear(in, out) {
    auto sub = register_module("weight_submodule", std::make_shared<nn::Module>());
    sub->register_parameter("parameter", parameter_slot("weight"));
  }
  std::string type_name() const override { return "LinearModuleAndSubModule"; }
};

TEST(InferAutoDeviceMap, TiedPrefixNamesDoNotCrash) {
  nn::Module model;
  model.register_module("compute", std::make_shared<LinearModuleAndSubModule>(3, 8));
  DeviceMap map = infer_auto_device_map(model, budget(R"({"0": 4, "cpu": 96000})"));
  EXPECT_EQ(map, J(R"({"": "cpu"})"));
}

std::shared_ptr<ModelForTest> model_with_buffers(bool linear3) {
  auto model = std::make_shared<ModelForTest>();
  model->linear1->register_buffer("test_buffer1", Tensor::zeros({10, 2}, DType::F32));
  model->batchnorm->register_buffer("test_buffer2", Tensor::zeros({10, 3}, DType::F32));
  model->linear2->register_buffer("test_buffer3", Tensor::zeros({10, 3}, DType::F32));
  if (linear3) {
    auto l3 = model->register_module("linear3", std::make_shared<nn::Linear>(4, 5));
    l3->register_buffer("test_buffer4", Tensor::zeros({10, 2}, DType::F32));
  }
  return model;
}

constexpr const char* kBufferWarning = "bytes of buffer for offloaded layers";

TEST(InferAutoDeviceMap, WarnsWhenOffloadedBuffersFitNoGpu) {
  // 236 bytes of parameters + 360 of buffers: linear1 64 + 80, batchnorm 72 + 160, linear2 100 + 120.
  auto model = model_with_buffers(false);
  {
    ScopedLogCapture logs;
    EXPECT_EQ(infer_auto_device_map(*model, budget(R"({"0": 400, "cpu": "1GB"})")),
              J(R"({"linear1": 0, "batchnorm": "cpu", "linear2": "cpu"})"));
    EXPECT_TRUE(logs.contains(kBufferWarning));
    EXPECT_TRUE(logs.contains("Current model requires 280 bytes"));
  }
  {
    ScopedLogCapture logs;
    PlanOptions o = budget(R"({"0": 400, "cpu": "1GB"})");
    o.offload_buffers = true;
    EXPECT_EQ(infer_auto_device_map(*model, o), J(R"({"linear1": 0, "batchnorm": "cpu", "linear2": "cpu"})"));
    EXPECT_FALSE(logs.contains(kBufferWarning));
  }
}

TEST(InferAutoDeviceMap, BufferCheckWithSeveralGpus) {
  auto model = model_with_buffers(true);  // + linear3 100 + 80
  {
    ScopedLogCapture logs;
    EXPECT_EQ(infer_auto_device_map(*model, budget(R"({"0": 400, "1": 400, "cpu": "1GB"})")),
              J(R"({"linear1": 0, "batchnorm": 1, "linear2": "cpu", "linear3": "cpu"})"));
    EXPECT_FALSE(logs.contains(kBufferWarning));
  }
  {
    ScopedLogCapture logs;
    EXPECT_EQ(infer_auto_device_map(*model, budget(R"({"0": 400, "1": 200, "cpu": "1GB"})")),
              J(R"({"linear1": 0, "batchnorm": 1, "linear2": "cpu", "linear3": "cpu"})"));
    EXPECT_TRUE(logs.contains(kBufferWarning));
  }
  {
    ScopedLogCapture logs;
    PlanOptions o = budget(R"({"0": 400, "1": 200, "cpu": "1GB"})");
    o.offload_buffers = true;
    EXPECT_EQ(infer_auto_device_map(*model, o),
              J(R"({"linear1": 0, "batchnorm": 1, "linear2": "cpu", "linear3": "cpu"})"));
    EXPECT_FALSE(logs.contains(kBufferWarning));
  }
}

std::shared_ptr<nn::Sequential> wrapped(Named inner) {
  return std::make_shared<nn::Sequential>(Named{{"module", std::make_shared<nn::Sequential>(std::move(inner))}});
}

TEST(InferAutoDeviceMap, FallbackAllocation) {
  auto model = wrapped({{"linear1", std::make_shared<nn::Linear>(10, 4)},
                        {"linear2", std::make_shared<nn::Linear>(4, 4)},
                        {"linear3", std::make_shared<nn::Linear>(4, 8)}});
  PlanOptions o = budget(R"({"0": 256})");
  {
    ScopedLogCapture logs;
    DeviceMap map = infer_auto_device_map(*model, o);
    for (const auto& [name, device] : map) EXPECT_NE(device, Device::cuda(0)) << name;
    EXPECT_TRUE(logs.contains("insufficient memory"));
    EXPECT_TRUE(logs.contains("cuda:0: 336 bytes required"));
  }
  o.fallback_allocation = true;
  {
    ScopedLogCapture logs;
    EXPECT_EQ(infer_auto_device_map(*model, o),
              J(R"({"module.linear1": "disk", "module.linear2": 0, "module.linear3": "disk"})"));
    EXPECT_FALSE(logs.contains("insufficient memory"));
  }
}

TEST(InferAutoDeviceMap, FallbackAllocationNoFit) {
  auto model = wrapped({{"linear1", std::make_shared<nn::Linear>(10, 10)},
                        {"linear2", std::make_shared<nn::Linear>(10, 10)},
                        {"linear3", std::make_shared<nn::Linear>(10, 10)}});
  PlanOptions o = budget(R"({"0": 30})");
  o.fallback_allocation = true;
  ScopedLogCapture logs;
  DeviceMap map = infer_auto_device_map(*model, o);
  for (const auto& [name, device] : map) EXPECT_NE(device, Device::cuda(0)) << name;
  EXPECT_EQ(map, J(R"({"": "disk"})"));
  EXPECT_TRUE(logs.contains("insufficient memory"));
}

class CustomModule : public nn::Module {
 public:
  CustomModule() {
    register_module("submodule1", std::make_shared<nn::Linear>(20, 20));
    register_module("submodule2", std::make_shared<nn::Linear>(20, 20));
  }
  std::string type_name() const override { return "CustomModule"; }
};

TEST(InferAutoDeviceMap, FallbackAllocationPartialFit) {
  auto model = std::make_shared<nn::Sequential>(Named{{"module1", std::make_shared<CustomModule>()},
                                                      {"module2", std::make_shared<CustomModule>()},
                                                      {"module3", std::make_shared<CustomModule>()}});
  PlanOptions o = budget(R"({"0": 5000})");
  o.fallback_allocation = true;
  DeviceMap map = infer_auto_device_map(*model, o);
  int on_gpu = 0;
  for (const auto& [name, device] : map) on_gpu += device == Device::cuda(0);
  EXPECT_GT(on_gpu, 0);
}

TEST(InferAutoDeviceMap, FallbackAllocationTiedWeights) {
  nn::Module model;
  model.register_module("linear1", std::make_shared<nn::Linear>(10, 10));
  model.register_module("linear2", std::make_shared<nn::Linear>(10, 10));
  tie(model, "linear2", "linear1");
  PlanOptions o = budget(R"({"0": 600})");
  o.fallback_allocation = true;
  EXPECT_EQ(infer_auto_device_map(model, o), J(R"({"": 0})"));
}

TEST(InferAutoDeviceMap, FallbackAllocationAndBuffers) {
  auto model = std::make_shared<nn::Sequential>(Named{{"linear1", std::make_shared<nn::Linear>(10, 10)},
                                                      {"batchnorm", std::make_shared<nn::BatchNorm1d>(10)},
                                                      {"linear2", std::make_shared<nn::Linear>(10, 10)}});
  model->child("linear1")->register_buffer("buffer1", Tensor::zeros({5}, DType::F32));
  model->child("batchnorm")->register_buffer("buffer2", Tensor::zeros({5}, DType::F32));
  model->child("linear2")->register_buffer("buffer3", Tensor::zeros({5}, DType::F32));
  PlanOptions o = budget(R"({"0": 678})");
  o.fallback_allocation = true;
  ScopedLogCapture logs;
  EXPECT_EQ(infer_auto_device_map(*model, o), J(R"({"batchnorm": 0, "linear1": "disk", "linear2": "disk"})"));
  EXPECT_TRUE(logs.contains("Current model requires"));
  EXPECT_TRUE(logs.contains("offload_buffers"));
}

TEST(GetModuleSizeWithTies, OneIsNotTen) {
  // ModuleList of 15 Linear(10, 10) with every weight tied: "1" must not be confused with "10".
  constexpr int kLayers = 15;
  auto model = std::make_shared<nn::ModuleList>();
  for (int i = 0; i < kLayers; ++i) model->push_back(std::make_shared<nn::Linear>(10, 10));
  for (int i = 1; i < kLayers; ++i) tie(*model, std::to_string(i), std::to_string(i - 1));
  auto tied = nn::find_tied_parameters(*model);
  ASSERT_EQ(tied.size(), 1u);
  const int64_t weight = 400, bias = 40;
  ModuleSizes sizes;
  sizes.add("", kLayers * (weight + bias));
  for (int i = 0; i < kLayers; ++i) {
    sizes.add(std::to_string(i), weight + bias);
    sizes.add(std::to_string(i) + ".weight", weight);
    sizes.add(std::to_string(i) + ".bias", bias);
  }
  detail::PlanQueue queue;
  for (std::size_t i = 1; i < model->children().size(); ++i)
    queue.push_back({model->children()[i].name, model->children()[i].module.get()});
  std::vector<std::string> tied_params(tied[0].begin() + 1, tied[0].end());
  auto result = detail::size_with_ties(tied_params, weight + bias, sizes, queue);
  EXPECT_EQ(result.size, weight + bias + (kLayers - 1) * bias);
  std::vector<std::string> names;
  for (const auto& o : result.owners) names.push_back(o.name);
  std::vector<std::string> expected;
  for (int i = 1; i < kLayers; ++i) expected.push_back(std::to_string(i));
  std::sort(expected.begin(), expected.end());  // find_tied_parameters sorts names: "1", "10", ..., "14", "2"
  EXPECT_EQ(names, expected);
}

TEST(InferAutoDeviceMap, VerboseExplainsEachDecision) {
  ModelForTest model;
  PlanOptions o = budget(R"({"0": 200, "1": 200})");
  o.verbose = true;
  ScopedLogCapture logs;
  infer_auto_device_map(model, o);
  EXPECT_TRUE(logs.contains("Treating module linear1."));
  EXPECT_TRUE(logs.contains("Putting linear1 (size=64) (available=100) on cuda:0."));
  EXPECT_TRUE(logs.contains("Not enough space on cuda:0 to put batchnorm (space available 36, module size 72)."));
  EXPECT_TRUE(logs.contains("This module cannot be split, going to the next device."));
  EXPECT_TRUE(logs.contains("Putting linear2 (size=100) (available=128) on cuda:1."));
  o.verbose = false;
  ScopedLogCapture quiet;
  infer_auto_device_map(model, o);
  EXPECT_FALSE(quiet.contains("Treating module"));
}

TEST(InferAutoDeviceMap, CleanResultOffKeepsEveryPlacedName) {
  PlanOptions o = budget(R"({"0": 2000})");
  o.clean_result = false;
  EXPECT_EQ(infer_auto_device_map(ModelForTest(), o), J(R"({"linear1": 0, "batchnorm": 0, "linear2": 0})"));
}

TEST(InferAutoDeviceMap, CpuOnlyAndDiskBudgets) {
  ModelForTest model;
  EXPECT_EQ(infer_auto_device_map(model, budget(R"({"cpu": 1000})")), J(R"({"": "cpu"})"));
  // cpu is a main device: it keeps the largest layer (100) free for the disk layers.
  EXPECT_EQ(infer_auto_device_map(model, budget(R"({"cpu": 200})")),
            J(R"({"linear1": "cpu", "batchnorm": "disk", "linear2": "disk"})"));
  // A disk budget is accepted but, as in Accelerate, not enforced.
  EXPECT_EQ(infer_auto_device_map(model, budget(R"({"disk": 1})")), J(R"({"": "disk"})"));
}

}  // namespace
}  // namespace ferry
