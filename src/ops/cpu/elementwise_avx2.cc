// AVX2/FMA kernels for the elementwise ops and activations (see elementwise_kernels.h). Tails use masked loads
// and stores, so every element goes through the same vector arithmetic whatever n is.
#include "elementwise_kernels.h"
#include "simd_avx2.h"

namespace ferry::ops::cpu::avx2 {
namespace {

template <class F>
inline void map1(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, f(_mm256_maskload_ps(x + i, m)));
  }
}

template <class F>
inline void map2(const float* a, const float* b, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, f(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m)));
  }
}

}  // namespace

void add(const float* a, const float* b, float* y, int64_t n) {
  map2(a, b, y, n, [](__m256 u, __m256 v) { return _mm256_add_ps(u, v); });
}
void mul(const float* a, const float* b, float* y, int64_t n) {
  map2(a, b, y, n, [](__m256 u, __m256 v) { return _mm256_mul_ps(u, v); });
}
void scale(const float* x, float s, float* y, int64_t n) {
  const __m256 sv = _mm256_set1_ps(s);
  map1(x, y, n, [sv](__m256 v) { return _mm256_mul_ps(v, sv); });
}
void silu(const float* x, float* y, int64_t n) { map1(x, y, n, silu256); }
void gelu(const float* x, float* y, int64_t n) { map1(x, y, n, gelu_erf256); }
void gelu_tanh(const float* x, float* y, int64_t n) { map1(x, y, n, gelu_tanh256); }
void relu(const float* x, float* y, int64_t n) {
  // max(0, x) returns its second operand when either is NaN, so NaN stays NaN.
  map1(x, y, n, [](__m256 v) { return _mm256_max_ps(_mm256_setzero_ps(), v); });
}
void silu_mul(const float* gate, const float* up, float* y, int64_t n) {
  map2(gate, up, y, n, [](__m256 g, __m256 u) { return _mm256_mul_ps(silu256(g), u); });
}

}  // namespace ferry::ops::cpu::avx2
