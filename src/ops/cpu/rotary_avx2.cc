// AVX2/FMA rotation kernels for apply_rotary_ (see rotary_kernels.h); tails run the scalar formula.
#include "rotary_kernels.h"
#include "simd_avx2.h"

namespace ferry::ops::cpu::avx2 {

void rotate_half(float* x, const float* cos, const float* sin, int64_t half) {
  int64_t i = 0;
  for (; i + 8 <= half; i += 8) {
    const __m256 x1 = _mm256_loadu_ps(x + i), x2 = _mm256_loadu_ps(x + half + i);
    const __m256 c = _mm256_loadu_ps(cos + i), s = _mm256_loadu_ps(sin + i);
    _mm256_storeu_ps(x + i, _mm256_fmsub_ps(x1, c, _mm256_mul_ps(x2, s)));
    _mm256_storeu_ps(x + half + i, _mm256_fmadd_ps(x2, c, _mm256_mul_ps(x1, s)));
  }
  for (; i < half; ++i) {
    const float x1 = x[i], x2 = x[i + half];
    x[i] = x1 * cos[i] - x2 * sin[i];
    x[i + half] = x2 * cos[i] + x1 * sin[i];
  }
}

void interleaved(float* x, const float* cos2, const float* sin2, int64_t rotary_dim) {
  int64_t j = 0;
  for (; j + 8 <= rotary_dim; j += 8) {
    const __m256 v = _mm256_loadu_ps(x + j);
    const __m256 swapped = _mm256_permute_ps(v, 0xB1);  // (x1, x0, x3, x2, ...)
    _mm256_storeu_ps(x + j, _mm256_fmadd_ps(v, _mm256_loadu_ps(cos2 + j),
                                            _mm256_mul_ps(swapped, _mm256_loadu_ps(sin2 + j))));
  }
  scalar::interleaved(x + j, cos2 + j, sin2 + j, rotary_dim - j);
}

}  // namespace ferry::ops::cpu::avx2
