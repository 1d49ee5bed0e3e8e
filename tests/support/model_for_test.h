// Accelerate's test models, shared by every layer's tests:
//   ModelForTest        linear1 Linear(3, 4) -> batchnorm BatchNorm1d(4) -> linear2 Linear(4, 5)   (test_hooks.py,
//                       test_modeling_utils.py); f32 sizes: linear1 64, batchnorm 72, linear2 100, total 236 bytes.
//   sequential_model(n) Sequential of linear1..linearN, each Linear(4, 4)                            (test_modeling_utils.py)
//   LinearWithNonPersistentBuffers(in, out)  buffers only: weight [out, in] = 1 (persistent), bias [out] = 1
//                       (non-persistent)                                                      (test_big_modeling.py)
// Parameters are drawn from ferry::nn's seeded generator (see nn/init.h); call ferry::nn::manual_seed first for
// fixed values.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ferry/nn/containers.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/module.h"
#include "ferry/nn/norm.h"

namespace ferry::test {

class ModelForTest : public nn::Module {
 public:
  ModelForTest();
  std::string type_name() const override { return "ModelForTest"; }
  /// linear2(batchnorm(linear1(x))); x: [N, 3] f32 -> [N, 5].
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();

  std::shared_ptr<nn::Linear> linear1;
  std::shared_ptr<nn::BatchNorm1d> batchnorm;
  std::shared_ptr<nn::Linear> linear2;
};

/// nn.Sequential(OrderedDict([("linear1", Linear(4, 4)), ..., ("linearN", Linear(4, 4))])).
std::shared_ptr<nn::Sequential> sequential_model(int n);

class LinearWithNonPersistentBuffers : public nn::Module {
 public:
  LinearWithNonPersistentBuffers(int64_t in_features, int64_t out_features);
  std::string type_name() const override { return "LinearWithNonPersistentBuffers"; }
  /// x · weightᵀ + bias.
  nn::Value forward(const nn::Args& args) override;
  using nn::Module::operator();
};

}  // namespace ferry::test
