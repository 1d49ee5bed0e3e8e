// AVX2/FMA/F16C attention kernel (see attention_kernels.h): q·k dot products with the cache row converted in
// registers, the AVX2 softmax, then the probability-weighted sum of v rows accumulated in `out`.
#include "attention_kernels.h"
#include "norm_kernels.h"
#include "simd_avx2.h"
#include "to_f32.h"

namespace ferry::ops::cpu::avx2 {
namespace {

template <DType T>
float dot(const float* q, const void* row, int64_t D) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  int64_t d = 0;
  for (; d + 16 <= D; d += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load8<T>(row, d), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), load8<T>(row, d + 8), a1);
  }
  for (; d + 8 <= D; d += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load8<T>(row, d), a0);
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; d < D; ++d) s += q[d] * load_f32(T, row, d);
  return s;
}

template <DType T>
void axpy(float p, const void* row, float* out, int64_t Dv) {
  const __m256 pv = _mm256_set1_ps(p);
  int64_t d = 0;
  for (; d + 8 <= Dv; d += 8)
    _mm256_storeu_ps(out + d, _mm256_fmadd_ps(pv, load8<T>(row, d), _mm256_loadu_ps(out + d)));
  for (; d < Dv; ++d) out[d] += p * load_f32(T, row, d);
}

template <DType T>
void attend_t(const float* q, const void* k, int64_t k_stride, const void* v, int64_t v_stride, int64_t D,
              int64_t Dv, int64_t n, float scale, float* scores, float* out) {
  const std::size_t es = dtype_size(T);
  const auto* kb = static_cast<const char*>(k);
  const auto* vb = static_cast<const char*>(v);
  for (int64_t j = 0; j < n; ++j) scores[j] = dot<T>(q, kb + static_cast<std::size_t>(j * k_stride) * es, D) * scale;
  softmax(scores, scores, n);
  for (int64_t d = 0; d < Dv; ++d) out[d] = 0;
  for (int64_t j = 0; j < n; ++j) axpy<T>(scores[j], vb + static_cast<std::size_t>(j * v_stride) * es, out, Dv);
}

}  // namespace

void attend(const float* q, const void* k, int64_t k_stride, const void* v, int64_t v_stride, DType kv, int64_t D,
            int64_t Dv, int64_t n, float scale, float* scores, float* out) {
  switch (kv) {
    case DType::F16: return attend_t<DType::F16>(q, k, k_stride, v, v_stride, D, Dv, n, scale, scores, out);
    case DType::BF16: return attend_t<DType::BF16>(q, k, k_stride, v, v_stride, D, Dv, n, scale, scores, out);
    default: return attend_t<DType::F32>(q, k, k_stride, v, v_stride, D, Dv, n, scale, scores, out);
  }
}

}  // namespace ferry::ops::cpu::avx2
