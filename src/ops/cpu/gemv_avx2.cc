// AVX2/FMA/F16C GEMV (see linear_kernels.h): one token times a weight matrix of any linear dtype.
//
// Decode is memory-bound: the only goal is to keep the memory system busy. A thread walks its rows four at a
// time, so four row streams are in flight per core (one stream per core reaches only about half of the
// machine's read bandwidth), with two accumulators per row to hide FMA latency. Conversion happens in
// registers (load8), never through memory.
#include "linear_kernels.h"
#include "simd_avx2.h"
#include "to_f32.h"

namespace ferry::ops::cpu::avx2 {
namespace {

template <DType T>
const char* row_ptr(const void* w, int64_t n, int64_t K) {
  return static_cast<const char*>(w) + static_cast<std::size_t>(n) * static_cast<std::size_t>(K) * dtype_size(T);
}

template <DType T>
void rows4(const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n) {
  const char* r[4] = {row_ptr<T>(w, n, K), row_ptr<T>(w, n + 1, K), row_ptr<T>(w, n + 2, K),
                      row_ptr<T>(w, n + 3, K)};
  __m256 a[4][2];
  for (auto& ar : a) ar[0] = ar[1] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
    for (int j = 0; j < 4; ++j) {
      a[j][0] = _mm256_fmadd_ps(load8<T>(r[j], k), x0, a[j][0]);
      a[j][1] = _mm256_fmadd_ps(load8<T>(r[j], k + 8), x1, a[j][1]);
    }
  }
  for (; k + 8 <= K; k += 8) {
    const __m256 x0 = _mm256_loadu_ps(x + k);
    for (int j = 0; j < 4; ++j) a[j][0] = _mm256_fmadd_ps(load8<T>(r[j], k), x0, a[j][0]);
  }
  for (int j = 0; j < 4; ++j) {
    float acc = hsum(_mm256_add_ps(a[j][0], a[j][1]));
    for (int64_t t = k; t < K; ++t) acc += load_f32(T, r[j], t) * x[t];
    y[n + j] = bias ? acc + bias[n + j] : acc;
  }
}

template <DType T>
void row1(const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n) {
  const char* r = row_ptr<T>(w, n, K);
  __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t k = 0;
  for (; k + 32 <= K; k += 32)
    for (int j = 0; j < 4; ++j) a[j] = _mm256_fmadd_ps(load8<T>(r, k + 8 * j), _mm256_loadu_ps(x + k + 8 * j), a[j]);
  for (; k + 8 <= K; k += 8) a[0] = _mm256_fmadd_ps(load8<T>(r, k), _mm256_loadu_ps(x + k), a[0]);
  float acc = hsum(_mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3])));
  for (; k < K; ++k) acc += load_f32(T, r, k) * x[k];
  y[n] = bias ? acc + bias[n] : acc;
}

template <DType T>
void gemv_rows(const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n0, int64_t n1) {
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) rows4<T>(w, K, x, bias, y, n);
  for (; n < n1; ++n) row1<T>(w, K, x, bias, y, n);
}

}  // namespace

void gemv(DType wt, const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n0, int64_t n1) {
  switch (wt) {
    case DType::F32: return gemv_rows<DType::F32>(w, K, x, bias, y, n0, n1);
    case DType::F16: return gemv_rows<DType::F16>(w, K, x, bias, y, n0, n1);
    case DType::BF16: return gemv_rows<DType::BF16>(w, K, x, bias, y, n0, n1);
    case DType::F8_E4M3FN: return gemv_rows<DType::F8_E4M3FN>(w, K, x, bias, y, n0, n1);
    case DType::F8_E5M2: return gemv_rows<DType::F8_E5M2>(w, K, x, bias, y, n0, n1);
    default: return scalar::gemv(wt, w, K, x, bias, y, n0, n1);
  }
}

}  // namespace ferry::ops::cpu::avx2
