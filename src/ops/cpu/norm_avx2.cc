// AVX2/FMA row kernels for rms_norm, layer_norm and softmax (see norm_kernels.h). Reductions use four 8-lane
// accumulators; tails use masked loads (masked-off lanes read as 0, which is neutral for sums, and are
// replaced by −inf for the maximum).
#include <cmath>

#include "norm_kernels.h"
#include "simd_avx2.h"

namespace ferry::ops::cpu::avx2 {
namespace {

float sum_of_squares(const float* x, int64_t D) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= D; i += 32) {
    __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    __m256 v2 = _mm256_loadu_ps(x + i + 16), v3 = _mm256_loadu_ps(x + i + 24);
    a0 = _mm256_fmadd_ps(v0, v0, a0), a1 = _mm256_fmadd_ps(v1, v1, a1);
    a2 = _mm256_fmadd_ps(v2, v2, a2), a3 = _mm256_fmadd_ps(v3, v3, a3);
  }
  for (; i + 8 <= D; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    a0 = _mm256_fmadd_ps(v, v, a0);
  }
  if (i < D) {
    __m256 v = _mm256_maskload_ps(x + i, tail_mask(D - i));
    a1 = _mm256_fmadd_ps(v, v, a1);
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

float sum(const float* x, int64_t D) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  int64_t i = 0;
  for (; i + 16 <= D; i += 16) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
  }
  for (; i + 8 <= D; i += 8) a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
  if (i < D) a1 = _mm256_add_ps(a1, _mm256_maskload_ps(x + i, tail_mask(D - i)));
  return hsum(_mm256_add_ps(a0, a1));
}

float centred_sum_of_squares(const float* x, int64_t D, float mean) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  const __m256 m = _mm256_set1_ps(mean);
  int64_t i = 0;
  for (; i + 16 <= D; i += 16) {
    __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), m), d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), m);
    a0 = _mm256_fmadd_ps(d0, d0, a0), a1 = _mm256_fmadd_ps(d1, d1, a1);
  }
  for (; i + 8 <= D; i += 8) {
    __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), m);
    a0 = _mm256_fmadd_ps(d, d, a0);
  }
  if (i < D) {
    const __m256i mask = tail_mask(D - i);
    __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), m), _mm256_castsi256_ps(mask));
    a1 = _mm256_fmadd_ps(d, d, a1);
  }
  return hsum(_mm256_add_ps(a0, a1));
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t D, float eps) {
  const float r = 1.0f / std::sqrt(sum_of_squares(x, D) / static_cast<float>(D) + eps);
  const __m256 rv = _mm256_set1_ps(r);
  int64_t i = 0;
  for (; i + 8 <= D; i += 8) {
    __m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + i), rv);
    _mm256_storeu_ps(y + i, w ? _mm256_mul_ps(_mm256_loadu_ps(w + i), t) : t);
  }
  for (; i < D; ++i) y[i] = w ? w[i] * (x[i] * r) : x[i] * r;
}

void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t D, float eps) {
  const float mean = sum(x, D) / static_cast<float>(D);
  const float rstd = 1.0f / std::sqrt(centred_sum_of_squares(x, D, mean) / static_cast<float>(D) + eps);
  const __m256 mv = _mm256_set1_ps(mean), rv = _mm256_set1_ps(rstd);
  int64_t i = 0;
  for (; i + 8 <= D; i += 8) {
    __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv), rv);
    if (w) t = _mm256_mul_ps(t, _mm256_loadu_ps(w + i));
    if (b) t = _mm256_add_ps(t, _mm256_loadu_ps(b + i));
    _mm256_storeu_ps(y + i, t);
  }
  for (; i < D; ++i) {
    float t = (x[i] - mean) * rstd;
    if (w) t *= w[i];
    if (b) t += b[i];
    y[i] = t;
  }
}

void softmax(const float* x, float* y, int64_t D) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 mv = neg_inf;
  int64_t i = 0;
  for (; i + 8 <= D; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
  __m256i tail = tail_mask(D - i);
  if (i < D) mv = _mm256_max_ps(mv, _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(x + i, tail), _mm256_castsi256_ps(tail)));
  const __m256 m = _mm256_set1_ps(hmax(mv));
  __m256 s0 = _mm256_setzero_ps(), s1 = s0;
  for (i = 0; i + 8 <= D; i += 8) {
    __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(y + i, e);
    s0 = _mm256_add_ps(s0, e);
  }
  if (i < D) {
    __m256 e = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_maskload_ps(x + i, tail), m)), _mm256_castsi256_ps(tail));
    _mm256_maskstore_ps(y + i, tail, e);
    s1 = e;
  }
  const __m256 inv = _mm256_set1_ps(1.0f / hsum(_mm256_add_ps(s0, s1)));
  for (i = 0; i + 8 <= D; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
  if (i < D) _mm256_maskstore_ps(y + i, tail, _mm256_mul_ps(_mm256_maskload_ps(y + i, tail), inv));
}

}  // namespace ferry::ops::cpu::avx2
