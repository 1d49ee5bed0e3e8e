// Normalisations over the last dimension (D) of f32 activations; weights/biases may be any float dtype.
#pragma once

#include "ferry/core/tensor.h"

namespace ferry::ops {

/// x / sqrt(mean(x²) + eps) · weight (Llama's RMSNorm, computed in f32). x: [..., D], weight: [D] or undefined
/// (no scaling). Gemma-style (1 + weight) scaling is the caller's: pass weight + 1.
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps);
/// (x − mean) / sqrt(var + eps) · weight + bias (biased variance, like torch). weight/bias may be undefined.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps);
/// Inference BatchNorm1d over x: [N, C], [N, C, L] or [C]: (x − running_mean) / sqrt(running_var + eps) · weight
/// + bias, evaluated like PyTorch's cpu kernel (x · alpha + beta per channel). weight/bias may be undefined.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, float eps);
/// Numerically stable softmax over the last dimension (the row maximum is subtracted first). A row that is all
/// −inf, or holds a NaN, gives NaN, as in PyTorch.
Tensor softmax(const Tensor& x);

}  // namespace ferry::ops
