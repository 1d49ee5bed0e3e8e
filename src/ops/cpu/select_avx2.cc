// AVX2 argmax over one row (see select_kernels.h): a vector pass finds the maximum and whether any NaN is
// present; a second pass finds the first lane equal to it. Rows with a NaN take the scalar path (first NaN).
#include "select_kernels.h"
#include "simd_avx2.h"

namespace ferry::ops::cpu::avx2 {

int64_t argmax_row(const float* x, int64_t V) {
  __m256 m0 = _mm256_set1_ps(-__builtin_inff()), m1 = m0;
  __m256 nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= V; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    m0 = _mm256_max_ps(m0, a), m1 = _mm256_max_ps(m1, b);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
  float m = hmax(_mm256_max_ps(m0, m1));
  bool has_nan = _mm256_movemask_ps(nan) != 0;
  for (int64_t t = i; t < V; ++t) {
    has_nan |= x[t] != x[t];
    m = x[t] > m ? x[t] : m;
  }
  if (has_nan) return scalar::argmax_row(x, V);
  const __m256 mv = _mm256_set1_ps(m);
  for (i = 0; i + 8 <= V; i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), mv, _CMP_EQ_OQ));
    if (mask) return i + __builtin_ctz(static_cast<unsigned>(mask));
  }
  for (; i < V; ++i)
    if (x[i] == m) return i;
  return 0;  // V == 0 is rejected at the op boundary; an all −inf row has its first element as the maximum
}

}  // namespace ferry::ops::cpu::avx2
