// AVX2/FMA/F16C attention kernel (see attention_kernels.h): q·k dot products four keys at a time with the cache
// rows converted in registers, the AVX2 softmax, then the probability-weighted sum of v rows, four rows per pass
// over `out`. All heads of a group walk the same block of keys before the next block is touched.
#include <algorithm>

#include "attention_kernels.h"
#include "norm_kernels.h"
#include "simd_avx2.h"
#include "to_f32.h"

namespace ferry::ops::cpu::avx2 {
namespace {

// Four keys at a time: four independent FMA chains instead of one, and one q load per four k loads.
template <DType T>
void dot4(const float* q, const char* k0, std::size_t stride, int64_t D, float* out) {
  const char* k[4] = {k0, k0 + stride, k0 + 2 * stride, k0 + 3 * stride};
  __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t d = 0;
  for (; d + 8 <= D; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    FERRY_UNROLL
    for (int j = 0; j < 4; ++j) a[j] = _mm256_fmadd_ps(qv, load8<T>(k[j], d), a[j]);
  }
  FERRY_UNROLL
  for (int j = 0; j < 4; ++j) {
    float s = hsum(a[j]);
    for (int64_t t = d; t < D; ++t) s += q[t] * load_f32(T, k[j], t);
    out[j] = s;
  }
}

template <DType T>
float dot(const float* q, const char* row, int64_t D) {
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

// out += Σ_j p[j] · v_j over four rows: each 8-wide slice of out is loaded and stored once per four rows.
template <DType T>
void axpy4(const float* p, const char* v0, std::size_t stride, float* out, int64_t Dv) {
  const char* v[4] = {v0, v0 + stride, v0 + 2 * stride, v0 + 3 * stride};
  const __m256 p0 = _mm256_set1_ps(p[0]), p1 = _mm256_set1_ps(p[1]), p2 = _mm256_set1_ps(p[2]),
               p3 = _mm256_set1_ps(p[3]);
  int64_t d = 0;
  for (; d + 8 <= Dv; d += 8) {
    __m256 o = _mm256_loadu_ps(out + d);
    o = _mm256_fmadd_ps(p0, load8<T>(v[0], d), o);
    o = _mm256_fmadd_ps(p1, load8<T>(v[1], d), o);
    o = _mm256_fmadd_ps(p2, load8<T>(v[2], d), o);
    o = _mm256_fmadd_ps(p3, load8<T>(v[3], d), o);
    _mm256_storeu_ps(out + d, o);
  }
  for (; d < Dv; ++d)
    for (int j = 0; j < 4; ++j) out[d] += p[j] * load_f32(T, v[j], d);
}

template <DType T>
void axpy(float p, const char* row, float* out, int64_t Dv) {
  const __m256 pv = _mm256_set1_ps(p);
  int64_t d = 0;
  for (; d + 8 <= Dv; d += 8)
    _mm256_storeu_ps(out + d, _mm256_fmadd_ps(pv, load8<T>(row, d), _mm256_loadu_ps(out + d)));
  for (; d < Dv; ++d) out[d] += p * load_f32(T, row, d);
}

// Cache rows of one head are a few hundred bytes, Hkv·D elements apart: too short and too far apart for the
// hardware prefetchers, so the rows a few keys ahead are requested explicitly.
constexpr int64_t kPrefetchKeys = 8;

inline void prefetch_row(const char* row, std::size_t bytes) {
  for (std::size_t off = 0; off < bytes; off += 64) _mm_prefetch(row + off, _MM_HINT_T0);
}

// Keys are processed in blocks small enough that a block's cache rows stay in L2 while every head of the group
// walks them: the rows come from memory once per group instead of once per head.
constexpr int64_t kKeyBlock = 256;

template <DType T>
void attend_t(const float* q, int64_t heads, const void* k, int64_t k_stride, const void* v, int64_t v_stride,
              int64_t D, int64_t Dv, int64_t n, float scale, float softcap, const float* bias, int64_t bias_stride,
              float* scores, float* out) {
  const std::size_t es = dtype_size(T), kb = static_cast<std::size_t>(k_stride) * es,
                    vb = static_cast<std::size_t>(v_stride) * es;
  const std::size_t k_row = static_cast<std::size_t>(D) * es, v_row = static_cast<std::size_t>(Dv) * es;
  const auto* kp = static_cast<const char*>(k);
  const auto* vp = static_cast<const char*>(v);
  for (int64_t b0 = 0; b0 < n; b0 += kKeyBlock) {
    const int64_t b1 = std::min(n, b0 + kKeyBlock);
    for (int64_t h = 0; h < heads; ++h) {
      float* sc = scores + h * n;
      int64_t j = b0;
      for (; j + 4 <= b1; j += 4) {
        if (h == 0)
          for (int64_t p = j + kPrefetchKeys; p < std::min(n, j + kPrefetchKeys + 4); ++p) prefetch_row(kp + p * kb, k_row);
        dot4<T>(q + h * D, kp + j * kb, kb, D, sc + j);
      }
      for (; j < b1; ++j) sc[j] = dot<T>(q + h * D, kp + j * kb, D);
    }
  }
  const __m256 sv = _mm256_set1_ps(scale);
  for (int64_t h = 0; h < heads; ++h) {
    float* sc = scores + h * n;
    int64_t j = 0;
    if (bias) {
      const float* b = bias + h * bias_stride;
      for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(sc + j, _mm256_fmadd_ps(_mm256_loadu_ps(sc + j), sv, _mm256_loadu_ps(b + j)));
      for (; j < n; ++j) sc[j] = sc[j] * scale + b[j];
    } else {
      for (; j + 8 <= n; j += 8) _mm256_storeu_ps(sc + j, _mm256_mul_ps(_mm256_loadu_ps(sc + j), sv));
      for (; j < n; ++j) sc[j] *= scale;
    }
    softcap_scores(sc, n, softcap);
    softmax(sc, sc, n);
    for (int64_t d = 0; d < Dv; ++d) out[h * Dv + d] = 0;
  }
  for (int64_t b0 = 0; b0 < n; b0 += kKeyBlock) {
    const int64_t b1 = std::min(n, b0 + kKeyBlock);
    for (int64_t h = 0; h < heads; ++h) {
      const float* sc = scores + h * n;
      float* o = out + h * Dv;
      int64_t j = b0;
      for (; j + 4 <= b1; j += 4) {
        if (h == 0)
          for (int64_t p = j + kPrefetchKeys; p < std::min(n, j + kPrefetchKeys + 4); ++p) prefetch_row(vp + p * vb, v_row);
        axpy4<T>(sc + j, vp + j * vb, vb, o, Dv);
      }
      for (; j < b1; ++j) axpy<T>(sc[j], vp + j * vb, o, Dv);
    }
  }
}

}  // namespace

void attend(const float* q, int64_t heads, const void* k, int64_t k_stride, const void* v, int64_t v_stride, DType kv,
            int64_t D, int64_t Dv, int64_t n, float scale, float softcap, const float* bias, int64_t bias_stride,
            float* scores, float* out) {
  const float c = softcap;
  const float* b = bias;
  const int64_t bs = bias_stride;
  switch (kv) {
    case DType::F16:
      return attend_t<DType::F16>(q, heads, k, k_stride, v, v_stride, D, Dv, n, scale, c, b, bs, scores, out);
    case DType::BF16:
      return attend_t<DType::BF16>(q, heads, k, k_stride, v, v_stride, D, Dv, n, scale, c, b, bs, scores, out);
    default: return attend_t<DType::F32>(q, heads, k, k_stride, v, v_stride, D, Dv, n, scale, c, b, bs, scores, out);
  }
}

}  // namespace ferry::ops::cpu::avx2
