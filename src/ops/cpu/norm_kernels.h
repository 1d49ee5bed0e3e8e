// Row kernels behind the normalisations and softmax (norm.h), one set per ISA: scalar in norm.cc / softmax.cc,
// AVX2 in norm_avx2.cc. Each normalises one row of D floats; y may alias x. Attention reuses softmax.
#pragma once

#include <cstdint>

#include "ferry/core/cpu_features.h"

namespace ferry::ops::cpu {

struct NormKernels {
  /// y = x · (1 / √(mean(x²) + eps)) · w (w == nullptr: no scaling).
  void (*rms_norm)(const float* x, const float* w, float* y, int64_t D, float eps);
  /// y = (x − mean) · (1 / √(var + eps)) · w + b (w, b may be nullptr).
  void (*layer_norm)(const float* x, const float* w, const float* b, float* y, int64_t D, float eps);
  /// y = exp(x − max) / Σ exp(x − max).
  void (*softmax)(const float* x, float* y, int64_t D);
};

const NormKernels& norm_kernels(Isa isa);

#define FERRY_NORM_DECLS                                                                       \
  void rms_norm(const float* x, const float* w, float* y, int64_t D, float eps);               \
  void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t D, float eps); \
  void softmax(const float* x, float* y, int64_t D);
namespace scalar {
FERRY_NORM_DECLS
}
namespace avx2 {
FERRY_NORM_DECLS
}
#undef FERRY_NORM_DECLS

}  // namespace ferry::ops::cpu
