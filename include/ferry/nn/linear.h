// Linear (torch.nn.Linear) and Conv1D (GPT-2's transposed linear from transformers.pytorch_utils).
//
// Legend: K = in_features, N = out_features; x is [..., K] f32, the result [..., N] f32. Weights may be stored
// in any float dtype (f32, f16, bf16, fp8); ops convert them on the fly.
#pragma once

#include <cstdint>
#include <string>

#include "ferry/nn/module.h"

namespace ferry::nn {

/// y = x · weightᵀ + bias. Parameters: weight [N, K], bias [N] (absent when bias=false).
/// Init (PyTorch's): weight and bias ~ U(-1/sqrt(K), 1/sqrt(K)). Forward: args[0] (or "input") = x.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, DType dtype = DType::F32);

  std::string type_name() const override { return "Linear"; }
  Value forward(const Args& args) override;
  using Module::operator();

  int64_t in_features() const noexcept { return in_features_; }
  int64_t out_features() const noexcept { return out_features_; }
  const Tensor& weight() const { return parameter("weight"); }
  /// Undefined when the layer has no bias.
  Tensor bias() const;

 private:
  int64_t in_features_, out_features_;
};

/// GPT-2's Conv1D: y = x · weight + bias with weight stored [K, N] (transposed compared with Linear), bias [N].
/// Constructor arguments in transformers' order: Conv1D(nf = N, nx = K). Init (transformers'): weight ~
/// N(0, 0.02), bias = 0. Forward: args[0] = x, f32 weights only (ops::matmul).
class Conv1D : public Module {
 public:
  Conv1D(int64_t nf, int64_t nx, DType dtype = DType::F32);

  std::string type_name() const override { return "Conv1D"; }
  Value forward(const Args& args) override;
  using Module::operator();

  int64_t nf() const noexcept { return nf_; }
  int64_t nx() const noexcept { return nx_; }
  const Tensor& weight() const { return parameter("weight"); }
  const Tensor& bias() const { return parameter("bias"); }

 private:
  int64_t nf_, nx_;
};

}  // namespace ferry::nn
