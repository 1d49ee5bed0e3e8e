// Kernels behind apply_rotary_ (rotary.h), one set per ISA: scalar in rotary.cc, AVX2 in rotary_avx2.cc.
// Both rotate one head's first R dims in place, given that token's cos/sin tables (built once per token in
// rotary.cc and shared by its heads).
#pragma once

#include <cstdint>

#include "ferry/core/cpu_features.h"

namespace ferry::ops::cpu {

struct RotaryKernels {
  /// Pairs (i, i + half): x_i' = x_i·cos_i − x_{i+half}·sin_i, x_{i+half}' = x_{i+half}·cos_i + x_i·sin_i. i < half.
  void (*rotate_half)(float* x, const float* cos, const float* sin, int64_t half);
  /// Pairs (2i, 2i + 1) with per-element tables (cos2[2i] = cos2[2i+1] = cos_i; sin2[2i] = −sin_i,
  /// sin2[2i+1] = +sin_i): x_j' = x_j·cos2_j + x_{j^1}·sin2_j for j < rotary_dim.
  void (*interleaved)(float* x, const float* cos2, const float* sin2, int64_t rotary_dim);
};

const RotaryKernels& rotary_kernels(Isa isa);

namespace scalar {
void rotate_half(float* x, const float* cos, const float* sin, int64_t half);
void interleaved(float* x, const float* cos2, const float* sin2, int64_t rotary_dim);
}  // namespace scalar
namespace avx2 {
void rotate_half(float* x, const float* cos, const float* sin, int64_t half);
void interleaved(float* x, const float* cos2, const float* sin2, int64_t rotary_dim);
}  // namespace avx2

}  // namespace ferry::ops::cpu
