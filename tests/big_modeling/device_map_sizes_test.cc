// compute_module_sizes, compute_module_total_buffer_size and get_max_layer_size, ported from Accelerate's
// test_modeling_utils.py (test_compute_module_sizes, test_compute_module_total_buffer_size) plus dtype rules.
#include <gtest/gtest.h>

#include <map>

#include "ferry/big_modeling/module_sizes.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/linear.h"
#include "support/model_for_test.h"

namespace ferry {
namespace {

using test::ModelForTest;

std::map<std::string, int64_t> as_map(const ModuleSizes& sizes) {
  return {sizes.entries().begin(), sizes.entries().end()};
}

TEST(DTypeByteSize, AccelerateValues) {
  EXPECT_EQ(dtype_byte_size(DType::Bool), 0.125);
  EXPECT_EQ(dtype_byte_size(DType::F16), 2);
  EXPECT_EQ(dtype_byte_size(DType::BF16), 2);
  EXPECT_EQ(dtype_byte_size(DType::F32), 4);
  EXPECT_EQ(dtype_byte_size(DType::F64), 8);
  EXPECT_EQ(dtype_byte_size(DType::F8_E4M3FN), 1);
  EXPECT_EQ(dtype_byte_size(DType::F8_E5M2), 1);
}

TEST(ComputeModuleSizes, ModelForTestInF32AndHalf) {
  ModelForTest model;
  std::map<std::string, int64_t> expected = {
      {"", 236},          {"linear1", 64},          {"linear1.weight", 48},         {"linear1.bias", 16},
      {"linear2", 100},   {"linear2.weight", 80},   {"linear2.bias", 20},           {"batchnorm", 72},
      {"batchnorm.weight", 16}, {"batchnorm.bias", 16}, {"batchnorm.running_mean", 16},
      {"batchnorm.running_var", 16}, {"batchnorm.num_batches_tracked", 8}};
  EXPECT_EQ(as_map(compute_module_sizes(model)), expected);

  model.to(DType::F16);
  for (auto& [name, size] : expected) size /= 2;
  expected["batchnorm.num_batches_tracked"] = 8;  // an int64 buffer is not converted to half
  expected["batchnorm"] += 4;
  expected[""] += 4;
  EXPECT_EQ(as_map(compute_module_sizes(model)), expected);
  EXPECT_EQ(compute_module_sizes(model).total(), 122);
}

TEST(ComputeModuleSizes, TargetDTypeCountsMinimumAndKeepsIntegers) {
  ModelForTest model;
  ModuleSizes half = compute_module_sizes(model, DType::F16);
  EXPECT_EQ(half.total(), 122);
  EXPECT_EQ(half["batchnorm.num_batches_tracked"], 8);
  // A wider target never widens: f64 counts the f32 tensors at 4 bytes.
  EXPECT_EQ(compute_module_sizes(model, DType::F64).total(), 236);
  EXPECT_EQ(compute_module_sizes(model, DType::F8_E4M3FN).total(), 57 + 8);

  // special_dtypes override by tensor name, for any tensor.
  SpecialDTypes special = {{"linear2.weight", DType::F32}, {"batchnorm.num_batches_tracked", DType::F16}};
  ModuleSizes mixed = compute_module_sizes(model, DType::F16, special);
  EXPECT_EQ(mixed["linear2.weight"], 80);
  EXPECT_EQ(mixed["linear2"], 90);
  EXPECT_EQ(mixed["batchnorm.num_batches_tracked"], 2);
  EXPECT_EQ(mixed.total(), 122 + 40 - 6);
}

TEST(ComputeModuleSizes, OrderAndMissingNames) {
  ModelForTest model;
  ModuleSizes sizes = compute_module_sizes(model);
  // Parameters first (linear1, batchnorm, linear2), then buffers, each adding "" and its prefixes first.
  std::vector<std::string> first;
  for (std::size_t i = 0; i < 4; ++i) first.push_back(sizes.entries()[i].first);
  EXPECT_EQ(first, (std::vector<std::string>{"", "linear1", "linear1.weight", "linear1.bias"}));
  EXPECT_EQ(sizes.entries().back().first, "batchnorm.num_batches_tracked");
  EXPECT_EQ(sizes["nope"], 0);
  EXPECT_FALSE(sizes.contains("nope"));
}

TEST(ComputeModuleSizes, TiedParametersCountOnce) {
  auto model = test::sequential_model(2);  // linear1, linear2: Linear(4, 4) = 80 bytes each
  model->child("linear2")->register_parameter("weight", model->child("linear1")->parameter_slot("weight"));
  ModuleSizes sizes = compute_module_sizes(*model);
  EXPECT_EQ(sizes.total(), 80 + 16);
  EXPECT_EQ(sizes["linear2"], 16);
  EXPECT_EQ(sizes["linear2.weight"], 0);
}

TEST(ComputeModuleSizes, BoolRoundsUpPerTensor) {
  nn::Module m;
  m.register_buffer("mask", Tensor::zeros({3, 3}, DType::Bool));
  m.register_buffer("flags", Tensor::zeros({16}, DType::Bool));
  ModuleSizes sizes = compute_module_sizes(m);
  EXPECT_EQ(sizes["mask"], 2);
  EXPECT_EQ(sizes["flags"], 2);
  EXPECT_EQ(sizes.total(), 4);
}

TEST(ComputeModuleTotalBufferSize, AccelerateCase) {
  ModelForTest model;
  model.linear1->register_buffer("test_buffer", Tensor::zeros({10, 10}, DType::F32));
  model.register_buffer("test_buffer2", Tensor::zeros({20, 10}, DType::F32));
  EXPECT_EQ(compute_module_total_buffer_size(model), 1240);
  model.to(DType::F16);
  EXPECT_EQ(compute_module_total_buffer_size(model), 624);
  EXPECT_EQ(compute_module_total_buffer_size(*model.linear2), 0);
}

TEST(GetMaxLayerSize, LeavesAndNoSplitModules) {
  auto model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<ModelForTest>(), std::make_shared<ModelForTest>()});
  ModuleSizes sizes = compute_module_sizes(*model);
  std::vector<PlanItem> items;
  for (const auto& c : model->children()) items.push_back({c.name, c.module.get()});
  MaxLayer leaves = get_max_layer_size(items, sizes, {});
  EXPECT_EQ(leaves.size, 100);
  EXPECT_EQ(leaves.names, (std::vector<std::string>{"0.linear2", "1.linear2"}));
  MaxLayer blocks = get_max_layer_size(items, sizes, {"ModelForTest"});
  EXPECT_EQ(blocks.size, 236);
  EXPECT_EQ(blocks.names, (std::vector<std::string>{"0", "1"}));
  // A tensor item is a layer of its own.
  items.push_back({"0.linear2.weight"});
  EXPECT_EQ(get_max_layer_size({{"0.linear2.weight"}}, sizes, {}).size, 80);
  EXPECT_EQ(get_max_layer_size({}, sizes, {}).size, 0);
}

}  // namespace
}  // namespace ferry
