// Normalisations over the last dimension (D) of f32 activations; weights/biases may be any float dtype.
#pragma once

#include "ferry/core/tensor.h"

namespace ferry::ops {

/// x / sqrt(mean(x²) + eps) · weight (Llama's RMSNorm, computed in f32). x: [..., D], weight: [D].
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps);
/// (x − mean) / sqrt(var + eps) · weight + bias (biased variance, like torch). weight/bias may be undefined.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps);
/// Inference BatchNorm1d over x: [N, C] (or [C]): (x − running_mean) / sqrt(running_var + eps) · weight + bias.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, float eps);
/// Numerically stable softmax over the last dimension.
Tensor softmax(const Tensor& x);

}  // namespace ferry::ops
