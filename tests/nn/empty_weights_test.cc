// init_empty_weights / init_on_device (Accelerate test_big_modeling.py test_init_empty_weights*): parameters on
// meta, buffers on cpu unless include_buffers, scopes undone on exit and on exceptions, thread-local, nestable,
// and a 100B-parameter model that allocates no tensor bytes (asserted with the core's memory accounting).
#include "ferry/nn/empty_weights.h"

#include <gtest/gtest.h>

#include <thread>

#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/core/memory.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/tied.h"
#include "support/model_for_test.h"

namespace ferry::nn {
namespace {

using test::ModelForTest;

TEST(InitEmptyWeights, ParametersOnMetaBuffersOnCpu) {
  {
    auto guard = init_empty_weights();
    ModelForTest model;
    for (const auto& [name, t] : model.named_parameters()) EXPECT_TRUE(t.is_meta()) << name;
    for (const auto& [name, t] : model.named_buffers()) EXPECT_EQ(t.device(), Device::cpu()) << name;
    EXPECT_EQ(model.linear1->weight().shape(), (Shape{4, 3}));
    EXPECT_EQ(model.batchnorm->buffer("num_batches_tracked").dtype(), DType::I64);
  }
  ModelForTest after;  // the scope is undone
  EXPECT_EQ(after.linear1->weight().device(), Device::cpu());
  EXPECT_EQ(parameter_init_device(), std::nullopt);
  EXPECT_EQ(buffer_init_device(), std::nullopt);
}

TEST(InitEmptyWeights, IncludeBuffersPutsBuffersOnMetaToo) {
  auto guard = init_empty_weights(/*include_buffers=*/true);
  ModelForTest model;
  for (const auto& [name, t] : model.state_dict()) EXPECT_TRUE(t.is_meta()) << name;
}

TEST(InitEmptyWeights, RegisteringAnExistingTensorMovesIt) {
  Tensor t = Tensor::zeros({2, 2}, DType::F32);
  Module m;
  {
    auto guard = init_empty_weights();
    m.register_parameter("p", t);
    m.register_buffer("b", t);
  }
  EXPECT_TRUE(m.parameter("p").is_meta());
  EXPECT_EQ(m.parameter("p").shape(), (Shape{2, 2}));
  EXPECT_TRUE(m.buffer("b").is_same(t));
}

TEST(InitEmptyWeights, UndoneWhenAnExceptionLeavesTheScope) {
  try {
    auto guard = init_empty_weights(true);
    throw Error("constructor failed");
  } catch (const Error&) {
  }
  EXPECT_EQ(parameter_init_device(), std::nullopt);
  EXPECT_EQ(buffer_init_device(), std::nullopt);
  // A layer constructor throwing inside the scope behaves the same.
  try {
    auto guard = init_empty_weights();
    Linear bad(-1, 2);
  } catch (const Error&) {
  }
  EXPECT_EQ(parameter_init_device(), std::nullopt);
}

TEST(InitEmptyWeights, NestedScopesRestoreTheOuterOne) {
  enable_virtual_devices({});
  {
    auto outer = init_on_device(Device::virt(0), /*include_buffers=*/true);
    {
      auto inner = init_empty_weights();
      ModelForTest model;
      EXPECT_TRUE(model.linear1->weight().is_meta());
      // The inner scope does not include buffers, so the outer one still places them (as in Accelerate).
      EXPECT_EQ(model.batchnorm->buffer("running_mean").device(), Device::virt(0));
    }
    ModelForTest model;
    EXPECT_EQ(model.linear1->weight().device(), Device::virt(0));
    EXPECT_EQ(model.batchnorm->buffer("running_var").to_vector<float>(), std::vector<float>(4, 1.0f));
  }
  EXPECT_EQ(parameter_init_device(), std::nullopt);
  disable_virtual_devices();
}

TEST(InitEmptyWeights, ScopeIsThreadLocal) {
  auto guard = init_empty_weights();
  Device seen = Device::meta();
  std::thread other([&] {
    Linear l(2, 2);
    seen = l.weight().device();
  });
  other.join();
  EXPECT_EQ(seen, Device::cpu());
  EXPECT_TRUE(Linear(2, 2).weight().is_meta());
}

TEST(InitOnDevice, RejectsDisk) { EXPECT_THROW(init_on_device(Device::disk()), Error); }

TEST(InitEmptyWeights, TiesSurviveAndStayMeta) {
  auto guard = init_empty_weights();
  auto l = std::make_shared<Linear>(4, 4);
  Sequential model({l, l});
  auto other = std::make_shared<Linear>(4, 4);
  other->register_parameter("weight", l->parameter_slot("weight"));
  model.push_back(other);
  EXPECT_TRUE(other->weight().is_meta());
  EXPECT_EQ(find_tied_parameters(model),
            (std::vector<std::vector<std::string>>{{"0.bias", "1.bias"}, {"0.weight", "1.weight", "2.weight"}}));
}

// Accelerate: "a 100B-parameter model builds instantly without using any RAM". Here: not a single tensor byte.
TEST(InitEmptyWeights, HundredBillionParametersAllocateNoTensorBytes) {
  const MemoryStats before = memory_stats(Device::cpu());
  reset_peak_memory_stats(Device::cpu());
  int64_t parameters = 0;
  {
    auto guard = init_empty_weights();
    ModuleList model;
    for (int i = 0; i < 1000; ++i) model.push_back(std::make_shared<Linear>(10000, 10000));
    for (const auto& [name, t] : model.named_parameters()) parameters += t.numel();
    EXPECT_TRUE(model.at<Linear>(999).weight().is_meta());
  }
  const MemoryStats after = memory_stats(Device::cpu());
  EXPECT_EQ(parameters, 1000 * (int64_t{10000} * 10000 + 10000));
  EXPECT_EQ(after.current, before.current);
  EXPECT_EQ(after.peak, before.current);  // not even transiently
}

}  // namespace
}  // namespace ferry::nn
