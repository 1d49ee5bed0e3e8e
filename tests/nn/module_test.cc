// Module tree: registration, PyTorch walk order and de-duplication, state_dict keys, lookups and their errors,
// whole-tree moves, named_module_tensors (Accelerate test_modeling_utils.py test_named_tensors).
#include "ferry/nn/module.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/core/error.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/module_tensors.h"
#include "ferry/nn/norm.h"
#include "support/model_for_test.h"

namespace ferry::nn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using test::ModelForTest;

std::vector<std::string> names(const NamedTensors& t) {
  std::vector<std::string> out;
  for (const auto& [n, v] : t) out.push_back(n);
  return out;
}

std::vector<std::string> names(const std::vector<NamedModule>& t) {
  std::vector<std::string> out;
  for (const auto& m : t) out.push_back(m.name);
  return out;
}

TEST(Module, StateDictKeysAndOrderMatchPyTorch) {
  ModelForTest model;
  EXPECT_THAT(names(model.state_dict()),
              ElementsAre("linear1.weight", "linear1.bias", "batchnorm.weight", "batchnorm.bias",
                          "batchnorm.running_mean", "batchnorm.running_var", "batchnorm.num_batches_tracked",
                          "linear2.weight", "linear2.bias"));
  const auto sd = model.state_dict();
  EXPECT_EQ(sd[0].second.shape(), (Shape{4, 3}));
  EXPECT_EQ(sd[6].second.dtype(), DType::I64);
  EXPECT_EQ(sd[6].second.dim(), 0);
}

TEST(Module, NamedParametersBuffersModulesOrder) {
  ModelForTest model;
  EXPECT_THAT(names(model.named_parameters()), ElementsAre("linear1.weight", "linear1.bias", "batchnorm.weight",
                                                           "batchnorm.bias", "linear2.weight", "linear2.bias"));
  EXPECT_THAT(names(model.named_buffers()),
              ElementsAre("batchnorm.running_mean", "batchnorm.running_var", "batchnorm.num_batches_tracked"));
  EXPECT_THAT(names(model.named_modules()), ElementsAre("", "linear1", "batchnorm", "linear2"));
  EXPECT_THAT(names(model.named_children()), ElementsAre("linear1", "batchnorm", "linear2"));
  EXPECT_TRUE(model.named_parameters(/*recurse=*/false).empty());
  EXPECT_EQ(model.type_name(), "ModelForTest");
  EXPECT_EQ(model.linear1->type_name(), "Linear");
}

TEST(Module, SharedSubmoduleIsListedOnceUnlessDuplicatesAreKept) {
  auto l = std::make_shared<Linear>(2, 2);
  Sequential seq({l, l});
  EXPECT_THAT(names(seq.named_modules()), ElementsAre("", "0"));
  EXPECT_THAT(names(seq.named_modules(/*remove_duplicate=*/false)), ElementsAre("", "0", "1"));
  EXPECT_THAT(names(seq.named_parameters()), ElementsAre("0.weight", "0.bias"));
  EXPECT_THAT(names(seq.named_parameters(true, false)), ElementsAre("0.weight", "0.bias", "1.weight", "1.bias"));
  // state_dict lists tied tensors under every name, as PyTorch does.
  EXPECT_THAT(names(seq.state_dict()), ElementsAre("0.weight", "0.bias", "1.weight", "1.bias"));
}

TEST(Module, ReplacingAChildOrParameterKeepsItsPosition) {
  ModelForTest model;
  model.register_module("batchnorm", std::make_shared<LayerNorm>(4));
  EXPECT_THAT(names(model.named_children()), ElementsAre("linear1", "batchnorm", "linear2"));
  EXPECT_EQ(model.get_submodule("batchnorm").type_name(), "LayerNorm");
  Linear lin(3, 2);
  lin.register_parameter("weight", Tensor::zeros({2, 3}, DType::F32));
  EXPECT_THAT(names(lin.named_parameters()), ElementsAre("weight", "bias"));
  EXPECT_EQ(lin.weight().to_vector<float>(), std::vector<float>(6, 0.0f));
}

TEST(Module, RegistrationRejectsBadNames) {
  Linear lin(3, 2);
  EXPECT_THROW(lin.register_parameter("a.b", Tensor::zeros({1}, DType::F32)), Error);
  EXPECT_THROW(lin.register_parameter("", Tensor::zeros({1}, DType::F32)), Error);
  EXPECT_THROW(lin.register_parameter("x", Tensor()), Error);
  EXPECT_THROW(lin.register_buffer("weight", Tensor::zeros({1}, DType::F32)), Error);
  EXPECT_THROW(lin.register_module("bias", std::make_shared<Linear>(1, 1)), Error);
  EXPECT_THROW(lin.register_module("child", std::shared_ptr<Module>()), Error);
  try {
    lin.register_buffer("weight", Tensor::zeros({1}, DType::F32));
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("a parameter has that name"));
  }
}

TEST(Module, GetSubmoduleAndLookupErrorsNameWhatExists) {
  ModelForTest model;
  EXPECT_EQ(&model.get_submodule(""), &model);
  EXPECT_EQ(&model.get_submodule("linear1"), model.linear1.get());
  EXPECT_EQ(model.find_submodule("linear1.x"), nullptr);
  try {
    model.get_submodule("linear3");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("has no submodule \"linear3\""));
    EXPECT_THAT(e.what(), HasSubstr("linear1, batchnorm, linear2"));
  }
  try {
    model.linear1->parameter("gamma");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("weight, bias"));
  }
  EXPECT_THROW(model.batchnorm->buffer("weight"), Error);
  EXPECT_TRUE(model.batchnorm->is_persistent_buffer("running_mean"));
  EXPECT_THROW(model.batchnorm->is_persistent_buffer("nope"), Error);
}

TEST(Module, ForwardOfAContainerThrows) {
  ModuleList list;
  list.push_back(std::make_shared<Linear>(2, 2));
  EXPECT_THROW(list(Args{Tensor::zeros({1, 2}, DType::F32)}), Error);
  EXPECT_EQ(list.size(), 1u);
  EXPECT_EQ(list.at<Linear>(0).in_features(), 2);
  EXPECT_THROW(list.at<LayerNorm>(0), Error);
  EXPECT_THROW(list[1], Error);
}

TEST(Module, ToDeviceMovesEveryTensorAndToDTypeCastsFloatsOnly) {
  ModelForTest model;
  model.to(DType::F16);
  for (const auto& [name, t] : model.state_dict()) {
    if (name == "batchnorm.num_batches_tracked")
      EXPECT_EQ(t.dtype(), DType::I64);
    else
      EXPECT_EQ(t.dtype(), DType::F16) << name;
  }
  model.to(Device::meta());
  for (const auto& [name, t] : model.state_dict()) EXPECT_TRUE(t.is_meta()) << name;
  try {
    model.to(Device::cpu());
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("linear1.weight"));
  }
}

TEST(Module, MoveGuardRunsBeforeTo) {
  ModelForTest model;
  model.set_move_guard([](const Module&, Device) { throw Error("offloaded model cannot move"); });
  EXPECT_THROW(model.to(Device::meta()), Error);
  EXPECT_FALSE(model.linear1->weight().is_meta());
}

TEST(NamedModuleTensors, BatchNormParametersBeforeBuffers) {
  BatchNorm1d bn(4);
  EXPECT_THAT(names(named_module_tensors(bn)),
              ElementsAre("weight", "bias", "running_mean", "running_var", "num_batches_tracked"));
  EXPECT_THAT(names(named_module_tensors(bn, /*include_buffers=*/false)), ElementsAre("weight", "bias"));
}

TEST(NamedModuleTensors, RecurseOverModelForTest) {
  ModelForTest model;
  EXPECT_TRUE(named_module_tensors(model).empty());
  EXPECT_THAT(names(named_module_tensors(model, true, /*recurse=*/true)),
              ElementsAre("linear1.weight", "linear1.bias", "batchnorm.weight", "batchnorm.bias", "linear2.weight",
                          "linear2.bias", "batchnorm.running_mean", "batchnorm.running_var",
                          "batchnorm.num_batches_tracked"));
  EXPECT_THAT(names(named_module_tensors(model, false, true)),
              ElementsAre("linear1.weight", "linear1.bias", "batchnorm.weight", "batchnorm.bias", "linear2.weight",
                          "linear2.bias"));
}

TEST(NamedModuleTensors, RemoveNonPersistent) {
  test::LinearWithNonPersistentBuffers model(10, 10);
  EXPECT_THAT(names(named_module_tensors(model, true, false, false)), ElementsAre("weight", "bias"));
  EXPECT_THAT(names(named_module_tensors(model, true, false, true)), ElementsAre("weight"));
  EXPECT_THAT(names(model.state_dict()), ElementsAre("weight"));
}

// Accelerate's test_named_module_tensors_does_not_corrupt_state_dict: the root's persistent "mask" must survive
// a child's non-persistent "mask" (ferry judges persistence by owner, so it is also kept in the listing).
TEST(NamedModuleTensors, PersistenceIsJudgedByOwner) {
  Module root;
  root.register_buffer("mask", Tensor::zeros({2}, DType::F32));
  auto sub = root.register_module("sub", std::make_shared<Module>());
  sub->register_buffer("mask", Tensor::zeros({2}, DType::F32), /*persistent=*/false);
  EXPECT_THAT(names(named_module_tensors(root, true, true, true)), ElementsAre("mask"));
  EXPECT_THAT(names(root.state_dict()), ElementsAre("mask"));
  EXPECT_EQ(get_non_persistent_buffers(root, true), (std::set<std::string>{"mask"}));
  EXPECT_EQ(get_non_persistent_buffers(root, true, /*fqns=*/true), (std::set<std::string>{"sub.mask"}));
  EXPECT_TRUE(get_non_persistent_buffers(root, false).empty());
  EXPECT_TRUE(root.is_persistent_buffer("mask"));
}

}  // namespace
}  // namespace ferry::nn
