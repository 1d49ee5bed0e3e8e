// AVX-512 small-batch linear (see linear_kernels.h): M activation rows (2 .. ~64, batched decode) times f32 / f16 /
// bf16 weight rows, every weight row read from memory once per call.
//
// Register tile: R = 4 weight rows × up to 6 activation rows, 24 zmm accumulators. K goes in steps of 32 as two
// halves of 16; per half the R weight vectors are converted once (bf16: one 64-byte load of 32 elements gives the
// even ones by a shift and the odd ones by a mask, x being arranged to match, bf16_x_block = 32; f16: vcvtph2ps;
// f32: a load) and each x vector is loaded once (as the FMAs' memory operand) for R FMAs. That is 24 FMAs per 6 x
// loads and 4 conversions: Zen 4 issues one 512-bit FMA per cycle, and the loop is FMA-bound once the weights come
// from cache. A block walks the M tiles one after another, so its weights (R × K elements) are read from memory for
// the first tile and from L1/L2 for the others. K tails (< 32) go in masked 16-wide steps on x as it is.
// N tails: a partial block repeats its last row and drops those outputs.
// Everything here has internal linkage and no standard-library template is instantiated (no std::min), so the linker
// cannot pick AVX-512 code of this file for a translation unit built for a lower ISA.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() values, which -Wuninitialized reports in every caller
// (a false positive): silenced for this file, before the header is read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "linear_kernels.h"

#define FERRY_UNROLL _Pragma("GCC unroll 16")

namespace ferry::ops::cpu::avx512 {
namespace {

constexpr int R = 4;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }


template <DType T>
constexpr std::size_t esize() {
  return T == DType::F32 ? 4 : 2;
}

// Half h (0: elements k .. k+15 in x's arranged order, 1: the next 16) of the 32-element step at k.
template <DType T>
inline __m512 load_half(const char* row, int64_t k, int h) {
  if constexpr (T == DType::BF16) {
    const __m512i v = _mm512_loadu_si512(row + 2 * k);
    return h == 0 ? _mm512_castsi512_ps(_mm512_slli_epi32(v, 16))
                  : _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  } else if constexpr (T == DType::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * (k + 16 * h))));
  } else {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k + 16 * h);
  }
}

// Elements k .. k+15 (lanes outside `mask` zero), in natural order.
template <DType T>
inline __m512 load_tail(const char* row, int64_t k, __mmask16 mask) {
  if constexpr (T == DType::F32) {
    return _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(row) + k);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, row + 2 * k);
    if constexpr (T == DType::F16) return _mm512_cvtph_ps(h);
    else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// out[r][m] = dot(row r, x_m) for R weight rows and MT activation rows (x_m = x + m·K).
// While it runs, a tile pulls `pf_bytes` bytes of each of the R rows at pf[r] towards the cache, spread evenly over
// its K steps (see run()).
template <DType T, int MT>
void tile(const char* const* rows, int64_t K, const float* x, float (*out)[kSmallBatchRowTile], const char* const* pf,
          int64_t pf_bytes) {
  const int64_t steps = K / 32, lines = (pf_bytes + 63) / 64;
  int64_t pf_line = 0, credit = 0;
  __m512 acc[R][MT];
  FERRY_UNROLL
  for (int r = 0; r < R; ++r)
    FERRY_UNROLL
    for (int m = 0; m < MT; ++m) acc[r][m] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    for (credit += lines; credit >= steps && pf_line < lines; credit -= steps, ++pf_line)
      FERRY_UNROLL
      for (int r = 0; r < R; ++r) _mm_prefetch(pf[r] + 64 * pf_line, _MM_HINT_T1);
    FERRY_UNROLL
    for (int h = 0; h < 2; ++h) {
      __m512 wv[R];
      FERRY_UNROLL
      for (int r = 0; r < R; ++r) wv[r] = load_half<T>(rows[r], k, h);
      FERRY_UNROLL
      for (int m = 0; m < MT; ++m) {
        const __m512 xv = _mm512_loadu_ps(x + m * K + k + 16 * h);
        FERRY_UNROLL
        for (int r = 0; r < R; ++r) acc[r][m] = _mm512_fmadd_ps(wv[r], xv, acc[r][m]);
      }
    }
  }
  for (; k < K; k += 16) {
    const __mmask16 mask = static_cast<__mmask16>(K - k >= 16 ? 0xFFFFu : (1u << (K - k)) - 1u);
    __m512 wv[R];
    FERRY_UNROLL
    for (int r = 0; r < R; ++r) wv[r] = load_tail<T>(rows[r], k, mask);
    FERRY_UNROLL
    for (int m = 0; m < MT; ++m) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + m * K + k);
      FERRY_UNROLL
      for (int r = 0; r < R; ++r) acc[r][m] = _mm512_fmadd_ps(wv[r], xv, acc[r][m]);
    }
  }
  FERRY_UNROLL
  for (int r = 0; r < R; ++r)
    FERRY_UNROLL
    for (int m = 0; m < MT; ++m) out[r][m] = _mm512_reduce_add_ps(acc[r][m]);
}

template <DType T>
void run(const void* w, int64_t K, const float* x, int64_t M, const float* bias, float* y, int64_t ldy, int64_t n0,
         int64_t n1) {
  // Balanced tiles: M = 7 runs as 4 + 3, not 6 + 1.
  const int64_t tiles = (M + kSmallBatchRowTile - 1) / kSmallBatchRowTile;
  const auto* base = static_cast<const char*>(w);
  const std::size_t row_bytes = esize<T>() * static_cast<std::size_t>(K);
  for (int64_t n = n0; n < n1; n += R) {
    const int valid = static_cast<int>(min64(R, n1 - n));
    const char* rows[R];
    for (int r = 0; r < R; ++r) rows[r] = base + static_cast<std::size_t>(n + (r < valid ? r : valid - 1)) * row_bytes;
    // The next block's rows, fetched while this block computes (its tiles share them out): the first tile of the
    // next block then finds its weights in L2 instead of waiting on memory between bursts of FMAs.
    const int64_t next_valid = min64(R, n1 - n - R);
    const char* next[R];
    for (int r = 0; r < R; ++r)
      next[r] = base + static_cast<std::size_t>(n + R + (r < next_valid ? r : next_valid - 1)) * row_bytes;
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t m0 = M * t / tiles, mt = M * (t + 1) / tiles - m0;
      const float* xt = x + m0 * K;
      const int64_t pf0 = next_valid > 0 ? static_cast<int64_t>(row_bytes) * t / tiles : 0;
      const int64_t pf_bytes = next_valid > 0 ? static_cast<int64_t>(row_bytes) * (t + 1) / tiles - pf0 : 0;
      const char* pf[R];
      for (int r = 0; r < R; ++r) pf[r] = next[r] + pf0;
      float out[R][kSmallBatchRowTile];
      switch (mt) {
        case 1: tile<T, 1>(rows, K, xt, out, pf, pf_bytes); break;
        case 2: tile<T, 2>(rows, K, xt, out, pf, pf_bytes); break;
        case 3: tile<T, 3>(rows, K, xt, out, pf, pf_bytes); break;
        case 4: tile<T, 4>(rows, K, xt, out, pf, pf_bytes); break;
        case 5: tile<T, 5>(rows, K, xt, out, pf, pf_bytes); break;
        default: tile<T, 6>(rows, K, xt, out, pf, pf_bytes); break;
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

}  // namespace ferry::ops::cpu::avx512
