// Layerwise casting: the storage dtype between forwards, the compute dtype inside, outputs within the storage
// dtype's tolerance of the f32 model (after Accelerate's test_hooks.py).
#include "ferry/big_modeling/layerwise_casting.h"

#include <gtest/gtest.h>

#include <cmath>

#include "dispatch_support.h"
#include "ferry/nn/linear.h"
#include "support/model_for_test.h"

namespace ferry {
namespace {

// Records the dtype of linear1's weight while linear1 runs.
struct DTypeProbe : nn::ModelHook {
  std::optional<DType> seen;
  nn::Args pre_forward(nn::Module& m, nn::Args a) override {
    seen = m.parameter("weight").dtype();
    return a;
  }
};

TEST(LayerwiseCasting, StoresNarrowComputesWide) {
  test::ModelForTest model;
  Tensor x = test::random_input({4, 3});
  Tensor expected = model(x);
  attach_layerwise_casting_hooks(model, DType::F8_E4M3FN, DType::BF16);
  EXPECT_EQ(model.linear1->parameter("weight").dtype(), DType::F8_E4M3FN);
  EXPECT_EQ(model.linear2->parameter("bias").dtype(), DType::F8_E4M3FN);
  EXPECT_EQ(model.batchnorm->parameter("weight").dtype(), DType::F32);  // not a Linear/Conv1D/Embedding
  EXPECT_EQ(model.batchnorm->buffer("num_batches_tracked").dtype(), DType::I64);
  auto probe = std::make_shared<DTypeProbe>();
  nn::add_hook_to_module(*model.linear1, probe, /*append=*/true);
  Tensor out = model(x);
  EXPECT_EQ(probe->seen, DType::BF16);
  EXPECT_EQ(model.linear1->parameter("weight").dtype(), DType::F8_E4M3FN);
  // fp8 e4m3 keeps 3 mantissa bits: relative error per weight ≤ 2^-4; through two layers allow 25%.
  auto a = out.to_vector<float>(), b = expected.to_vector<float>();
  double max_rel = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    max_rel = std::max(max_rel, std::fabs(a[i] - b[i]) / std::max(1.0, std::fabs(double(b[i]))));
  EXPECT_LT(max_rel, 0.25) << "max relative difference " << max_rel;
  EXPECT_GT(max_rel, 0.0);  // the cast really happened
}

TEST(LayerwiseCasting, SkipsByPatternAndClass) {
  test::ModelForTest model;
  attach_layerwise_casting_hooks(model, DType::BF16, DType::F32, {"linear2$"});
  EXPECT_EQ(model.linear1->parameter("weight").dtype(), DType::BF16);
  EXPECT_EQ(model.linear2->parameter("weight").dtype(), DType::F32);
  test::ModelForTest by_class;
  attach_layerwise_casting_hooks(by_class, DType::BF16, DType::F32, {}, {"Linear"});
  EXPECT_EQ(by_class.linear1->parameter("weight").dtype(), DType::F32);
  EXPECT_THROW(attach_layerwise_casting_hooks(by_class, DType::BF16, DType::F32, {"("}), Error);
  EXPECT_THROW(attach_layerwise_casting_hooks(by_class, DType::I8, DType::F32), Error);
}

}  // namespace
}  // namespace ferry
