// Normalisation layers over the last dimension (LayerNorm, RMSNorm) or over channels (BatchNorm1d, inference).
//
// Legend: D = normalised size (hidden size or channels). Inputs are f32; parameters any float dtype.
#pragma once

#include <cstdint>
#include <string>

#include "ferry/nn/module.h"

namespace ferry::nn {

/// torch.nn.LayerNorm(D, eps=1e-5, elementwise_affine=True, bias=True): parameters weight [D] = 1, bias [D] = 0
/// (each absent when not affine / no bias). Forward: args[0] = x [..., D].
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true,
                     DType dtype = DType::F32);

  std::string type_name() const override { return "LayerNorm"; }
  Value forward(const Args& args) override;
  using Module::operator();

  int64_t normalized_shape() const noexcept { return dim_; }
  double eps() const noexcept { return eps_; }

 private:
  int64_t dim_;
  double eps_;
};

/// Hugging Face's LlamaRMSNorm(hidden_size, eps=1e-6): weight [D] = 1, no bias; x / sqrt(mean(x²) + eps) ·
/// weight computed in f32. type_name() is "RMSNorm"; model families subclass it to return their class name
/// ("LlamaRMSNorm", "Qwen2RMSNorm"). Forward: args[0] = x [..., D].
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t hidden_size, double eps = 1e-6, DType dtype = DType::F32);

  std::string type_name() const override { return "RMSNorm"; }
  Value forward(const Args& args) override;
  using Module::operator();

  int64_t hidden_size() const noexcept { return dim_; }
  double eps() const noexcept { return eps_; }
  const Tensor& weight() const { return parameter("weight"); }

 private:
  int64_t dim_;
  double eps_;
};

/// torch.nn.BatchNorm1d(C, eps=1e-5) in eval mode (ferry is inference only, so running statistics are always
/// used): parameters weight [C] = 1, bias [C] = 0; persistent buffers running_mean [C] = 0, running_var [C] = 1,
/// num_batches_tracked i64 scalar (shape []) = 0, as in PyTorch's state_dict. Forward: args[0] = x [N, C] or [C].
class BatchNorm1d : public Module {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, DType dtype = DType::F32);

  std::string type_name() const override { return "BatchNorm1d"; }
  Value forward(const Args& args) override;
  using Module::operator();

  int64_t num_features() const noexcept { return num_features_; }
  double eps() const noexcept { return eps_; }

 private:
  int64_t num_features_;
  double eps_;
};

}  // namespace ferry::nn
