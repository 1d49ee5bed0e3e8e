// AVX2/FMA/F16C GEMV (see linear_kernels.h): one token times a weight matrix of any linear dtype.
//
// Decode is memory-bound: the only goal is to keep the memory system streaming. Two shapes of traversal, chosen
// by the row length (measured on the 2-core Zen 4 dev VM with huge-page weights; bench/bench_ops.cc):
//  - short rows (x of at most 16 KiB, half an L1, i.e. K <= 4096): one row at a time with four accumulators, so
//    each thread reads one sequential stream, which the hardware prefetcher follows best (0.93-0.99 of a plain read
//    at K = 2048 and 4096, against 0.73-0.88 for eight interleaved rows, whose streams sit 4 KiB apart);
//  - long rows: eight rows at a time, so x is loaded once per eight rows instead of once per row; x no longer
//    stays in L1 beside the stream, and one-row traversal drops to ~0.5-0.75 (K = 5632) against ~0.9.
// Conversion happens in registers (load8 and friends), never through memory.
#include <vector>

#include "linear_kernels.h"
#include "simd_avx2.h"
#include "to_f32.h"

namespace ferry::ops::cpu::avx2 {
namespace {

// The traversal choice above: x (f32) fits in half of a 32 KiB L1.
constexpr int64_t kOneRowMaxK = 4096;
bool stream_one_row(int64_t K) { return K <= kOneRowMaxK; }

template <DType T>
const char* row_ptr(const void* w, int64_t n, int64_t K) {
  constexpr std::size_t esize = T == DType::F32 ? 4 : (T == DType::F16 || T == DType::BF16) ? 2 : 1;
  return static_cast<const char*>(w) + static_cast<std::size_t>(n) * static_cast<std::size_t>(K) * esize;
}

// R rows at once, 8 elements per row per step: R independent accumulators hide the FMA latency, and R row
// streams keep R × 2 threads' worth of misses in flight.
template <DType T, int R>
void rows(const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n) {
  const char* r[R];
  FERRY_UNROLL
  for (int j = 0; j < R; ++j) r[j] = row_ptr<T>(w, n + j, K);
  __m256 a[R];
  FERRY_UNROLL
  for (auto& v : a) v = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    const __m256 xv = _mm256_loadu_ps(x + k);
    FERRY_UNROLL
    for (int j = 0; j < R; ++j) a[j] = _mm256_fmadd_ps(load8<T>(r[j], k), xv, a[j]);
  }
  for (int j = 0; j < R; ++j) {
    float acc = hsum(a[j]);
    for (int64_t t = k; t < K; ++t) acc += load_f32(T, r[j], t) * x[t];
    y[n + j] = bias ? acc + bias[n + j] : acc;
  }
}

// Kernels over 16-element blocks, for the dtypes whose cheapest load yields 16 elements as two 8-lane vectors (lo,
// hi): a Block loader fills them for row r at element k, and x_block holds x arranged to match (lo pairs with
// x_block[k..k+7], hi with x_block[k+8..k+15]); tails use x itself. scale() undoes a loader's scaled domain.
//  - fp8: 16 bytes through load16_fp8, x as is, sums in the 2^-8-scaled domain for e4m3fn.
//  - bf16 with 32-byte loads: of 16 elements read as eight 32-bit words, the even ones are the words shifted left by
//    16 and the odd ones the words with the low half masked off, so x is pre-arranged per 16-block as
//    [x0 x2 .. x14 | x1 x3 .. x15]. Half the loads of load8 and no shuffles: decode is limited by how many
//    instructions sit between misses, not by arithmetic.
template <DType T>
struct Fp8Block {
  void operator()(const char* r, int64_t k, __m256& lo, __m256& hi) const { load16_fp8<T>(r, k, lo, hi); }
  static float scale() { return fp8_scale<T>(); }
};

struct Bf16Block {
  __m256i odd_mask = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  void operator()(const char* r, int64_t k, __m256& lo, __m256& hi) const {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 2 * k));
    lo = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    hi = _mm256_castsi256_ps(_mm256_and_si256(v, odd_mask));
  }
  static float scale() { return 1.0f; }
};

// R rows at once, one 16-element block per row per step (the interleaved traversal).
template <DType T, int R, class Block>
void rows_by16(const void* w, int64_t K, const float* x_block, const float* x, const float* bias, float* y, int64_t n,
               const Block& block) {
  const char* r[R];
  FERRY_UNROLL
  for (int j = 0; j < R; ++j) r[j] = row_ptr<T>(w, n + j, K);
  __m256 a[R];
  FERRY_UNROLL
  for (auto& v : a) v = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m256 x0 = _mm256_loadu_ps(x_block + k), x1 = _mm256_loadu_ps(x_block + k + 8);
    FERRY_UNROLL
    for (int j = 0; j < R; ++j) {
      __m256 lo, hi;
      block(r[j], k, lo, hi);
      a[j] = _mm256_fmadd_ps(hi, x1, _mm256_fmadd_ps(lo, x0, a[j]));
    }
  }
  FERRY_UNROLL
  for (int j = 0; j < R; ++j) {
    float acc = hsum(a[j]) * Block::scale();
    for (int64_t t = k; t < K; ++t) acc += load_f32(T, r[j], t) * x[t];
    y[n + j] = bias ? acc + bias[n + j] : acc;
  }
}

// One row, two blocks (32 elements) per step into four accumulators (the one-stream traversal).
template <DType T, class Block>
void row1_by16(const void* w, int64_t K, const float* x_block, const float* x, const float* bias, float* y, int64_t n,
               const Block& block) {
  const char* r = row_ptr<T>(w, n, K);
  __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t k = 0;
  for (; k + 32 <= K; k += 32)
    FERRY_UNROLL
    for (int h = 0; h < 2; ++h) {
      __m256 lo, hi;
      block(r, k + 16 * h, lo, hi);
      a[2 * h] = _mm256_fmadd_ps(lo, _mm256_loadu_ps(x_block + k + 16 * h), a[2 * h]);
      a[2 * h + 1] = _mm256_fmadd_ps(hi, _mm256_loadu_ps(x_block + k + 16 * h + 8), a[2 * h + 1]);
    }
  float acc = hsum(_mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]))) * Block::scale();
  for (; k < K; ++k) acc += load_f32(T, r, k) * x[k];
  y[n] = bias ? acc + bias[n] : acc;
}

void gemv_bf16(const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n0, int64_t n1) {
  // x arranged per 16-block as [x0 x2 .. x14 | x1 x3 .. x15], with vector shuffles: every chunk of rows (about 64 KiB
  // of weights) redoes it, and element by element it cost as many instructions as ~2 rows' dot products.
  thread_local std::vector<float> x_eo;
  x_eo.resize(static_cast<std::size_t>(K));
  for (int64_t k = 0; k + 16 <= K; k += 16) {
    const __m256 a = _mm256_loadu_ps(x + k), b = _mm256_loadu_ps(x + k + 8);
    // Per 128-bit lane: evens x0 x2 x8 x10 | x4 x6 x12 x14, odds likewise; then the 64-bit pairs into order.
    const __m256 ev = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 od = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    constexpr int kPairs = _MM_SHUFFLE(3, 1, 2, 0);
    _mm256_storeu_ps(x_eo.data() + k, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), kPairs)));
    _mm256_storeu_ps(x_eo.data() + k + 8, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), kPairs)));
  }
  const Bf16Block block;
  int64_t n = n0;
  if (!stream_one_row(K))
    for (; n + 8 <= n1; n += 8) rows_by16<DType::BF16, 8>(w, K, x_eo.data(), x, bias, y, n, block);
  for (; n < n1; ++n) row1_by16<DType::BF16>(w, K, x_eo.data(), x, bias, y, n, block);
}

template <DType T>
void row1(const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n) {
  const char* r = row_ptr<T>(w, n, K);
  __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t k = 0;
  for (; k + 32 <= K; k += 32)
    FERRY_UNROLL
    for (int j = 0; j < 4; ++j) a[j] = _mm256_fmadd_ps(load8<T>(r, k + 8 * j), _mm256_loadu_ps(x + k + 8 * j), a[j]);
  for (; k + 8 <= K; k += 8) a[0] = _mm256_fmadd_ps(load8<T>(r, k), _mm256_loadu_ps(x + k), a[0]);
  float acc = hsum(_mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3])));
  for (; k < K; ++k) acc += load_f32(T, r, k) * x[k];
  y[n] = bias ? acc + bias[n] : acc;
}

template <DType T>
void gemv_rows(const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n0, int64_t n1) {
  int64_t n = n0;
  const bool one_row = stream_one_row(K);
  if constexpr (T == DType::F8_E4M3FN || T == DType::F8_E5M2) {
    const Fp8Block<T> block;
    if (!one_row)
      for (; n + 8 <= n1; n += 8) rows_by16<T, 8>(w, K, x, x, bias, y, n, block);
    for (; n < n1; ++n) row1_by16<T>(w, K, x, x, bias, y, n, block);
    return;
  }
  if (!one_row) {
    for (; n + 8 <= n1; n += 8) rows<T, 8>(w, K, x, bias, y, n);
    for (; n + 4 <= n1; n += 4) rows<T, 4>(w, K, x, bias, y, n);
  }
  for (; n < n1; ++n) row1<T>(w, K, x, bias, y, n);
}

}  // namespace

void gemv(DType wt, const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n0, int64_t n1) {
  switch (wt) {
    case DType::F32: return gemv_rows<DType::F32>(w, K, x, bias, y, n0, n1);
    case DType::F16: return gemv_rows<DType::F16>(w, K, x, bias, y, n0, n1);
    case DType::BF16: return gemv_bf16(w, K, x, bias, y, n0, n1);
    case DType::F8_E4M3FN: return gemv_rows<DType::F8_E4M3FN>(w, K, x, bias, y, n0, n1);
    case DType::F8_E5M2: return gemv_rows<DType::F8_E5M2>(w, K, x, bias, y, n0, n1);
    default: return scalar::gemv(wt, w, K, x, bias, y, n0, n1);
  }
}

}  // namespace ferry::ops::cpu::avx2
