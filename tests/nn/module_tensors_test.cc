// set_module_tensor_to_device and name lookups (Accelerate test_modeling_utils.py test_set_module_tensor_*):
// meta round trips need a value, local and dotted names, shape errors with Accelerate's text, dtype rules
// (integers never cast), ties preserved, TiedParamsMap reuse.
#include "ferry/nn/module_tensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/core/memory.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/tied.h"
#include "support/model_for_test.h"

namespace ferry::nn {
namespace {

using ::testing::HasSubstr;
using test::ModelForTest;

Tensor randn(Shape shape) { return make_tensor(shape, DType::F32, Device::cpu(), TensorInit::normal(0, 1)); }

// Accelerate's check_set_module_tensor_for_device(model, "cpu", "meta").
TEST(SetModuleTensorToDevice, MetaAndBackNeedsAValue) {
  ModelForTest model;
  set_module_tensor_to_device(model, "linear1.weight", Device::meta());
  EXPECT_TRUE(model.linear1->weight().is_meta());
  try {
    set_module_tensor_to_device(model, "linear1.weight", Device::cpu());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.problem(), "weight is on the meta device, we need a `value` to put in on cpu.");
    EXPECT_EQ(e.where(), "linear1.weight");
  }
  set_module_tensor_to_device(model, "linear1.weight", Device::cpu(), randn({4, 3}));
  EXPECT_EQ(model.linear1->weight().device(), Device::cpu());

  // A buffer, by submodule and local name.
  set_module_tensor_to_device(*model.batchnorm, "running_mean", Device::meta());
  EXPECT_TRUE(model.batchnorm->buffer("running_mean").is_meta());
  EXPECT_THROW(set_module_tensor_to_device(*model.batchnorm, "running_mean", Device::cpu()), Error);
  set_module_tensor_to_device(*model.batchnorm, "running_mean", Device::cpu(), randn({4}));
  EXPECT_EQ(model.batchnorm->buffer("running_mean").device(), Device::cpu());

  // A buffer, by full name.
  set_module_tensor_to_device(model, "batchnorm.running_mean", Device::meta());
  EXPECT_THROW(set_module_tensor_to_device(model, "batchnorm.running_mean", Device::cpu()), Error);
  set_module_tensor_to_device(model, "batchnorm.running_mean", Device::cpu(), randn({4}));
  EXPECT_EQ(model.batchnorm->buffer("running_mean").device(), Device::cpu());
}

TEST(SetModuleTensorToDevice, BetweenRealDevicesWithoutValue) {
  enable_virtual_devices({});
  ModelForTest model;
  const auto before = model.linear1->weight().to_vector<float>();
  set_module_tensor_to_device(model, "linear1.weight", Device::virt(0));
  EXPECT_EQ(model.linear1->weight().device(), Device::virt(0));
  set_module_tensor_to_device(model, "linear1.weight", Device::virt(1));
  set_module_tensor_to_device(model, "linear1.weight", Device::cpu());
  EXPECT_EQ(model.linear1->weight().to_vector<float>(), before);
  disable_virtual_devices();
}

TEST(SetModuleTensorToDevice, ChecksShapeWithAcceleratesMessage) {
  ModelForTest model;
  try {
    set_module_tensor_to_device(model, "linear1.weight", Device::cpu(), Tensor::zeros({2, 2}, DType::F32));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.problem(),
              "Trying to set a tensor of shape [2, 2] in \"weight\" (which has shape [4, 3]), this looks incorrect.");
  }
  EXPECT_EQ(model.linear1->weight().shape(), (Shape{4, 3}));
}

TEST(SetModuleTensorToDevice, SetsDType) {
  ModelForTest model;
  set_module_tensor_to_device(model, "linear1.weight", Device::cpu(), model.linear1->weight(), DType::F16);
  EXPECT_EQ(model.linear1->weight().dtype(), DType::F16);
  // Without a value (ferry applies dtype on every device).
  set_module_tensor_to_device(model, "linear2.weight", Device::cpu(), {}, DType::BF16);
  EXPECT_EQ(model.linear2->weight().dtype(), DType::BF16);
  set_module_tensor_to_device(model, "linear2.bias", Device::meta(), {}, DType::F16);
  EXPECT_EQ(model.linear2->bias().dtype(), DType::F16);
  EXPECT_TRUE(model.linear2->bias().is_meta());
}

TEST(SetModuleTensorToDevice, WithoutDTypeCastsToTheExistingDType) {
  ModelForTest model;
  Tensor v = Tensor::from_vector<double>({1, 2, 3, 4}, {4});
  set_module_tensor_to_device(model, "linear1.bias", Device::cpu(), v);
  EXPECT_EQ(model.linear1->bias().dtype(), DType::F32);
  EXPECT_EQ(model.linear1->bias().to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  // i32 into the i64 buffer: cast to i64 like PyTorch's load_state_dict.
  Tensor n = Tensor::from_vector<int32_t>({7}, {});
  set_module_tensor_to_device(model, "batchnorm.num_batches_tracked", Device::cpu(), n);
  EXPECT_EQ(model.batchnorm->buffer("num_batches_tracked").dtype(), DType::I64);
  EXPECT_EQ(model.batchnorm->buffer("num_batches_tracked").item<int64_t>(), 7);
}

TEST(SetModuleTensorToDevice, IntegerAndBoolValuesAreNeverCastToDType) {
  ModelForTest model;
  Tensor n = Tensor::from_vector<int64_t>({3}, {});
  set_module_tensor_to_device(model, "batchnorm.num_batches_tracked", Device::cpu(), n, DType::F16);
  EXPECT_EQ(model.batchnorm->buffer("num_batches_tracked").dtype(), DType::I64);
  Module m;
  m.register_buffer("mask", Tensor::from_vector<uint8_t>({1, 0}, {2}, DType::Bool));
  set_module_tensor_to_device(m, "mask", Device::cpu(), Tensor::from_vector<uint8_t>({0, 1}, {2}, DType::Bool),
                              DType::F32);
  EXPECT_EQ(m.buffer("mask").dtype(), DType::Bool);
  EXPECT_EQ(m.buffer("mask").to_vector<bool>(), (std::vector<bool>{false, true}));
}

TEST(SetModuleTensorToDevice, SameDeviceAndDTypeValueIsUsedWithoutCopy) {
  ModelForTest model;
  Tensor v = randn({4, 3});
  set_module_tensor_to_device(model, "linear1.weight", Device::cpu(), v);
  EXPECT_TRUE(model.linear1->weight().is_same(v));
}

TEST(SetModuleTensorToDevice, UnknownNamesSayWhatExists) {
  ModelForTest model;
  try {
    set_module_tensor_to_device(model, "linear1.gamma", Device::cpu());
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("does not have a parameter or a buffer named gamma."));
  }
  try {
    set_module_tensor_to_device(model, "linear9.weight", Device::cpu());
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no submodule \"linear9\""));
  }
  EXPECT_THROW(set_module_tensor_to_device(model, "weight", Device::cpu()), Error);
  EXPECT_THROW(set_module_tensor_to_device(model, "linear1.weight", Device::disk()), Error);
  EXPECT_EQ(find_tensor_slot(model, "linear9.weight"), nullptr);
  EXPECT_EQ(find_tensor_slot(model, "linear1.gamma"), nullptr);
  EXPECT_EQ(find_tensor_slot(model, "batchnorm.running_var")->tensor.shape(), (Shape{4}));
  EXPECT_TRUE(get_module_tensor(model, "linear2.bias").is_same(model.linear2->bias()));
  auto [owner, local] = resolve_tensor_owner(model, "batchnorm.running_mean");
  EXPECT_EQ(owner, model.batchnorm.get());
  EXPECT_EQ(local, "running_mean");
}

TEST(SetModuleTensorToDevice, MovingATiedParameterMovesEveryName) {
  ModelForTest model;
  auto a = std::make_shared<Linear>(4, 4), b = std::make_shared<Linear>(4, 4);
  Module root;
  root.register_module("a", a);
  root.register_module("b", b);
  b->register_parameter("weight", a->parameter_slot("weight"));
  set_module_tensor_to_device(root, "b.weight", Device::meta());
  EXPECT_TRUE(a->weight().is_meta());
  Tensor v = randn({4, 4});
  set_module_tensor_to_device(root, "a.weight", Device::cpu(), v);
  EXPECT_TRUE(b->weight().is_same(v));
  EXPECT_EQ(find_tied_parameters(root), (std::vector<std::vector<std::string>>{{"a.weight", "b.weight"}}));
}

TEST(SetModuleTensorToDevice, TiedParamsMapReusesTheTensorAlreadyPlaced) {
  enable_virtual_devices({});
  // Two untied slots loaded from the same source tensor (what a hook sees for a tied weight offloaded to cpu).
  Module root;
  auto a = root.register_module("a", std::make_shared<Linear>(4, 4));
  auto b = root.register_module("b", std::make_shared<Linear>(4, 4));
  set_module_tensor_to_device(root, "a.weight", Device::meta());
  set_module_tensor_to_device(root, "b.weight", Device::meta());
  Tensor source = randn({4, 4});
  TiedParamsMap tied;
  tied[tensor_data_ptr(source)];  // seeded by the caller, as AlignDevicesHook does
  const int64_t before = memory_stats(Device::virt(0)).current;
  set_module_tensor_to_device(root, "a.weight", Device::virt(0), source, std::nullopt, &tied);
  set_module_tensor_to_device(root, "b.weight", Device::virt(0), source, std::nullopt, &tied);
  EXPECT_TRUE(a->weight().is_same(b->weight()));
  EXPECT_EQ(memory_stats(Device::virt(0)).current - before, 64);  // one copy of 16 floats
  EXPECT_EQ(tied.at(tensor_data_ptr(source)).size(), 1u);
  // An unseeded key is never added.
  TiedParamsMap empty;
  set_module_tensor_to_device(root, "a.bias", Device::virt(0), {}, std::nullopt, &empty);
  EXPECT_TRUE(empty.empty());
  disable_virtual_devices();
}

TEST(TensorDataPtr, NullForMetaAndUndefined) {
  EXPECT_EQ(tensor_data_ptr(Tensor()), nullptr);
  EXPECT_EQ(tensor_data_ptr(Tensor::empty({2}, DType::F32, Device::meta())), nullptr);
  Tensor t = Tensor::zeros({4}, DType::F32);
  EXPECT_EQ(tensor_data_ptr(t.slice(1, 3)), static_cast<const char*>(tensor_data_ptr(t)) + 4);
}

}  // namespace
}  // namespace ferry::nn
