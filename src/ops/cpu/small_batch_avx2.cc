// AVX2/FMA/F16C small-batch linear (see linear_kernels.h and small_batch_avx512.cc, the same design on 8 lanes):
// M activation rows (2 .. ~64, batched decode) times f32 / f16 / bf16 weight rows, every weight row read from memory
// once per call.
//
// Register tile: R = 2 weight rows × up to 6 activation rows: 12 ymm accumulators, 2 weight vectors, one x vector and
// the bf16 mask fill the 16 ymm registers. K goes in steps of 16 as two halves of 8 (bf16: one 32-byte load, even
// elements by a shift, odd ones by a mask, x arranged to match, bf16_x_block = 16); K tails (< 16) are scalar.
// With R = 2 each FMA needs twice the x bytes of the AVX-512 kernel's R = 4, which L2 feeds at ~60% of the FMA rate
// (68 GFLOP/s of 113 on one core at M = 16), so ops::linear hands AVX2 only up to kSmallBatchMaxRowsAvx2 rows.
// N tails: a partial block repeats its last row and drops those outputs.
#include <cstdint>

#include "linear_kernels.h"
#include "simd_avx2.h"
#include "to_f32.h"

namespace ferry::ops::cpu::avx2 {
namespace {

constexpr int R = 2;

template <DType T>
constexpr std::size_t esize() {
  return T == DType::F32 ? 4 : 2;
}

// Half h (0: elements k .. k+7 in x's arranged order, 1: the next 8) of the 16-element step at k.
template <DType T>
inline __m256 load_half(const char* row, int64_t k, int h) {
  if constexpr (T == DType::BF16) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k));
    return h == 0 ? _mm256_castsi256_ps(_mm256_slli_epi32(v, 16))
                  : _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
  } else {
    return load8<T>(row, k + 8 * h);
  }
}

// out[r][m] = dot(row r, x_m) for R weight rows and MT activation rows (x_m = x + m·K).
template <DType T, int MT>
void tile(const char* const* rows, int64_t K, const float* x, float (*out)[kSmallBatchRowTile]) {
  __m256 acc[R][MT];
  FERRY_UNROLL
  for (int r = 0; r < R; ++r)
    FERRY_UNROLL
    for (int m = 0; m < MT; ++m) acc[r][m] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    FERRY_UNROLL
    for (int h = 0; h < 2; ++h) {
      __m256 wv[R];
      FERRY_UNROLL
      for (int r = 0; r < R; ++r) wv[r] = load_half<T>(rows[r], k, h);
      FERRY_UNROLL
      for (int m = 0; m < MT; ++m) {
        __m256 xv = _mm256_loadu_ps(x + m * K + k + 8 * h);
        // One load per x vector: left alone, GCC folds the load into each of the R FMAs (a memory operand each),
        // and the loop runs out of load slots at half the FMA rate.
        __asm__("" : "+x"(xv));
        FERRY_UNROLL
        for (int r = 0; r < R; ++r) acc[r][m] = _mm256_fmadd_ps(wv[r], xv, acc[r][m]);
      }
    }
  }
  FERRY_UNROLL
  for (int r = 0; r < R; ++r)
    FERRY_UNROLL
    for (int m = 0; m < MT; ++m) {
      float s = hsum(acc[r][m]);
      for (int64_t t = k; t < K; ++t) s += load_f32(T, rows[r], t) * x[m * K + t];
      out[r][m] = s;
    }
}

template <DType T>
void run(const void* w, int64_t K, const float* x, int64_t M, const float* bias, float* y, int64_t ldy, int64_t n0,
         int64_t n1) {
  // Balanced tiles: M = 7 runs as 4 + 3, not 6 + 1.
  const int64_t tiles = (M + kSmallBatchRowTile - 1) / kSmallBatchRowTile;
  const auto* base = static_cast<const char*>(w);
  const std::size_t row_bytes = esize<T>() * static_cast<std::size_t>(K);
  for (int64_t n = n0; n < n1; n += R) {
    const int valid = n1 - n < R ? static_cast<int>(n1 - n) : R;
    const char* rows[R];
    for (int r = 0; r < R; ++r) rows[r] = base + static_cast<std::size_t>(n + (r < valid ? r : valid - 1)) * row_bytes;
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t m0 = M * t / tiles, mt = M * (t + 1) / tiles - m0;
      const float* xt = x + m0 * K;
      float out[R][kSmallBatchRowTile];
      switch (mt) {
        case 1: tile<T, 1>(rows, K, xt, out); break;
        case 2: tile<T, 2>(rows, K, xt, out); break;
        case 3: tile<T, 3>(rows, K, xt, out); break;
        case 4: tile<T, 4>(rows, K, xt, out); break;
        case 5: tile<T, 5>(rows, K, xt, out); break;
        default: tile<T, 6>(rows, K, xt, out); break;
      }
      for (int64_t m = 0; m < mt; ++m)
        for (int r = 0; r < valid; ++r) y[(m0 + m) * ldy + n + r] = bias ? out[r][m] + bias[n + r] : out[r][m];
    }
  }
}

}  // namespace

void small_batch(DType wt, const void* w, int64_t K, const float* x, int64_t M, const float* bias, float* y,
                 int64_t ldy, int64_t n0, int64_t n1) {
  switch (wt) {
    case DType::F32: return run<DType::F32>(w, K, x, M, bias, y, ldy, n0, n1);
    case DType::F16: return run<DType::F16>(w, K, x, M, bias, y, ldy, n0, n1);
    case DType::BF16: return run<DType::BF16>(w, K, x, M, bias, y, ldy, n0, n1);
    default: return scalar::small_batch(wt, w, K, x, M, bias, y, ldy, n0, n1);
  }
}

}  // namespace ferry::ops::cpu::avx2
