// Kernels behind the elementwise ops and activations (elementwise.h), one set per ISA: scalar in
// elementwise.cc / activation.cc, AVX2 in elementwise_avx2.cc / activation_avx2.cc. Every kernel works on a
// contiguous run of n floats; y may alias a or x (in-place ops), since element i is read before it is written.
#pragma once

#include <cstdint>
#include <functional>

#include "ferry/core/cpu_features.h"

namespace ferry::ops::cpu {

struct ElementwiseKernels {
  void (*add)(const float* a, const float* b, float* y, int64_t n);
  void (*mul)(const float* a, const float* b, float* y, int64_t n);
  void (*scale)(const float* x, float s, float* y, int64_t n);
  void (*silu)(const float* x, float* y, int64_t n);
  void (*gelu)(const float* x, float* y, int64_t n);
  void (*gelu_tanh)(const float* x, float* y, int64_t n);
  void (*relu)(const float* x, float* y, int64_t n);
  void (*silu_mul)(const float* gate, const float* up, float* y, int64_t n);
};

const ElementwiseKernels& elementwise_kernels(Isa isa);

#define FERRY_ELEMENTWISE_DECLS                                              \
  void add(const float* a, const float* b, float* y, int64_t n);             \
  void mul(const float* a, const float* b, float* y, int64_t n);             \
  void scale(const float* x, float s, float* y, int64_t n);                  \
  void silu(const float* x, float* y, int64_t n);                            \
  void gelu(const float* x, float* y, int64_t n);                            \
  void gelu_tanh(const float* x, float* y, int64_t n);                       \
  void relu(const float* x, float* y, int64_t n);                            \
  void silu_mul(const float* gate, const float* up, float* y, int64_t n);
namespace scalar {
FERRY_ELEMENTWISE_DECLS
}
namespace avx2 {
FERRY_ELEMENTWISE_DECLS
}
#undef FERRY_ELEMENTWISE_DECLS

/// Splits n elements into chunks of at least `grain` for the thread pool (small inputs run inline).
void parallel_elements(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1 << 14);

}  // namespace ferry::ops::cpu
