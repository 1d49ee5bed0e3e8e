// Matrix products for transformer layers. Activations are f32; weights may be stored as f32, f16, bf16,
// f8_e4m3fn or f8_e5m2 and are converted on the fly, block by block, never materialised whole.
//
// Legend: T = tokens (rows of x), K = in_features, N = out_features.
// One token (T == 1, decode) takes the GEMV path: memory-bound, each weight row streamed once by the threads.
// Many tokens (prefill) take the blocked GEMM path (OpenBLAS sgemm is measured against it in bench/bench_ops.cc).
#pragma once

#include "ferry/core/tensor.h"

namespace ferry::ops {

/// y = x · weightᵀ + bias, like torch.nn.functional.linear.
/// x: [..., K] f32 on cpu; weight: [N, K] float dtype; bias: undefined or [N] (any float dtype). Returns [..., N] f32.
/// Throws ferry::Error naming both shapes when K differs.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

/// linear() into a caller-owned `out` ([..., N] f32, same device as x), so hot loops need not allocate.
/// out must not overlap x or weight.
void linear_into(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out);

/// c = a · b for a: [M, K], b: [K, N], both f32. Returns [M, N] f32.
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace ferry::ops
