// AVX-512 BF16 GEMM kernels for bf16 weights (see linear_kernels.h; driver in gemm_bf16.cc): vdpbf16ps multiplies
// the two bf16 halves of each 32-bit lane of two vectors and adds both products to that lane's f32 accumulator, so
// both operands are laid out as bf16 pairs along K (pair p = elements 2p, 2p + 1 of the reduction):
//   activations: an MR-row panel holds, per pair p, MR 32-bit words (one pair per row), f32 rounded to bf16 to
//                nearest-even by vcvtne2ps2bf16 (which also flushes denormals to ±0 and keeps NaN a NaN, quieted);
//                round_to_bf16 rounds through the same code for the bf16 GEMV and small-batch kernels;
//   weights:     an NR-column panel holds, per pair p, NR words (one pair per output feature). A bf16 weight row
//                [K] already stores its pairs as consecutive words, so packing is a 32-bit transpose of 16 rows ×
//                16 words in registers, with no conversion.
// Microkernel: kBf16MR × kBf16NR outputs in 2 · MR zmm accumulators; per pair two weight vectors are loaded and each
// row's pair is broadcast once for two vdpbf16ps (24 of them per 14 loads at MR = 12).
// A K that is odd ends with a pair whose upper half is zero in both operands.
// Everything here has internal linkage except the kernels, and no standard-library template is instantiated,
// so the linker cannot pick code of this file (built with -mavx512bf16) for a translation unit of a lower ISA.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() values, which -Wuninitialized reports in every caller
// (a false positive): silenced for this file, before the header is read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "linear_kernels.h"

#define FERRY_UNROLL _Pragma("GCC unroll 32")

namespace ferry::ops::cpu::avx512bf16 {
namespace {

constexpr int MR = kBf16MR, NR = kBf16NR;

inline uint32_t load_word(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Word p of the bf16 row at `row` over elements [0, len): elements 2p and 2p + 1, the second 0 past len.
inline uint32_t pair_word(const char* row, int64_t p, int64_t len) {
  uint16_t lo, hi = 0;
  std::memcpy(&lo, row + 4 * p, 2);
  if (2 * p + 1 < len) std::memcpy(&hi, row + 4 * p + 2, 2);
  return static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16;
}

// r[i] (16 words each) becomes column i: r[w] lane j = old r[j] lane w.
inline void transpose16(__m512i r[16]) {
  __m512i a[16], c[16];
  FERRY_UNROLL
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);      // per 128-bit lane: r0.0 r1.0 r0.1 r1.1
    a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);  // r0.2 r1.2 r0.3 r1.3
  }
  FERRY_UNROLL
  for (int g = 0; g < 4; ++g) {  // rows 4g .. 4g + 3: c[4g + e] lane L holds their word 4L + e
    c[4 * g + 0] = _mm512_unpacklo_epi64(a[4 * g], a[4 * g + 2]);
    c[4 * g + 1] = _mm512_unpackhi_epi64(a[4 * g], a[4 * g + 2]);
    c[4 * g + 2] = _mm512_unpacklo_epi64(a[4 * g + 1], a[4 * g + 3]);
    c[4 * g + 3] = _mm512_unpackhi_epi64(a[4 * g + 1], a[4 * g + 3]);
  }
  FERRY_UNROLL
  for (int e = 0; e < 4; ++e) {
    const __m512i x_lo = _mm512_shuffle_i32x4(c[e], c[4 + e], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i x_hi = _mm512_shuffle_i32x4(c[e], c[4 + e], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i y_lo = _mm512_shuffle_i32x4(c[8 + e], c[12 + e], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i y_hi = _mm512_shuffle_i32x4(c[8 + e], c[12 + e], _MM_SHUFFLE(3, 2, 3, 2));
    r[0 + e] = _mm512_shuffle_i32x4(x_lo, y_lo, _MM_SHUFFLE(2, 0, 2, 0));
    r[4 + e] = _mm512_shuffle_i32x4(x_lo, y_lo, _MM_SHUFFLE(3, 1, 3, 1));
    r[8 + e] = _mm512_shuffle_i32x4(x_hi, y_hi, _MM_SHUFFLE(2, 0, 2, 0));
    r[12 + e] = _mm512_shuffle_i32x4(x_hi, y_hi, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

inline __mmask16 low_mask(int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
}

// Elements [0, min(left, 32)) of p rounded to bf16 (zeros past them), in order: 32 bf16, i.e. 16 pairs. The one
// rounding of every bf16-weight path (pack_x here, round_to_bf16 for the GEMV and small-batch kernels).
inline __m512i round32(const float* p, int64_t left) {
  const __m512 lo = _mm512_maskz_loadu_ps(low_mask(left), p);
  const __m512 hi = left > 16 ? _mm512_maskz_loadu_ps(low_mask(left - 16), p + 16) : _mm512_setzero_ps();
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

}  // namespace

void round_to_bf16(const float* x, int64_t n, uint16_t* dst) {
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) _mm512_storeu_si512(dst + k, round32(x + k, 32));
  if (k < n) {
    const int64_t left = n - k;
    const __mmask32 m = static_cast<__mmask32>(left >= 32 ? 0xFFFFFFFFu : (1u << left) - 1u);
    _mm512_mask_storeu_epi16(dst + k, m, round32(x + k, left));
  }
}

void pack_x(const float* x, int64_t K, int64_t m0, int mr, int64_t k0, int64_t kc, uint32_t* dst) {
  const int64_t pairs = (kc + 1) / 2;
  alignas(64) uint32_t words[16];
  for (int i = 0; i < mr; ++i) {
    const float* row = x + (m0 + i) * K + k0;
    for (int64_t k = 0; k < kc; k += 32) {
      _mm512_store_si512(words, round32(row + k, kc - k));
      const int64_t p0 = k / 2, n = pairs - p0 < 16 ? pairs - p0 : 16;
      for (int64_t t = 0; t < n; ++t) dst[(p0 + t) * MR + i] = words[t];
    }
  }
  for (int64_t p = 0; p < pairs; ++p)
    for (int i = mr; i < MR; ++i) dst[p * MR + i] = 0;
}

void pack_w(const void* w, int64_t K, int64_t n0, int rows, int64_t k0, int64_t kc, uint32_t* panel) {
  const int64_t pairs = (kc + 1) / 2;
  const auto* base = static_cast<const char*>(w);
  for (int j0 = 0; j0 < NR; j0 += 16) {
    const int here = rows - j0 < 0 ? 0 : rows - j0 < 16 ? rows - j0 : 16;
    const char* r[16];
    for (int j = 0; j < 16; ++j)  // rows past `here` are never read
      r[j] = j < here ? base + (static_cast<std::size_t>(n0 + j0 + j) * K + k0) * 2 : base;
    int64_t p = 0;
    if (here == 16) {
      for (; 2 * (p + 16) <= kc; p += 16) {  // 16 whole pairs of each of 16 rows
        __m512i v[16];
        FERRY_UNROLL
        for (int j = 0; j < 16; ++j) v[j] = _mm512_loadu_si512(r[j] + 4 * p);
        transpose16(v);
        FERRY_UNROLL
        for (int t = 0; t < 16; ++t) _mm512_storeu_si512(panel + (p + t) * NR + j0, v[t]);
      }
    }
    for (; p < pairs; ++p)
      for (int j = 0; j < 16; ++j) panel[p * NR + j0 + j] = j < here ? pair_word(r[j], p, kc) : 0;
  }
}

void micro(int64_t kp, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, int mr, int nr, bool accumulate,
           const float* bias) {
  static_assert(NR == 32, "the microkernel holds two 16-lane vectors per row");
  __m512 acc[MR][2];
  FERRY_UNROLL
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  // The output tile is read (or written) only after the loop: start fetching its lines now.
  for (int i = 0; i < mr; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + nr - 1), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * NR);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * NR + 16);
    const uint32_t* ap = a + p * MR;
    FERRY_UNROLL
    for (int i = 0; i < MR; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);
    }
  }
  const __mmask16 m0 = low_mask(nr), m1 = low_mask(nr - 16 > 0 ? nr - 16 : 0);
  __m512 base0 = _mm512_setzero_ps(), base1 = base0;
  if (!accumulate && bias) base0 = _mm512_maskz_loadu_ps(m0, bias), base1 = _mm512_maskz_loadu_ps(m1, bias + 16);
  FERRY_UNROLL
  for (int i = 0; i < MR; ++i) {
    if (i >= mr) break;
    float* ci = c + i * ldc;
    const __m512 o0 = accumulate ? _mm512_maskz_loadu_ps(m0, ci) : base0;
    const __m512 o1 = accumulate ? _mm512_maskz_loadu_ps(m1, ci + 16) : base1;
    _mm512_mask_storeu_ps(ci, m0, _mm512_add_ps(o0, acc[i][0]));
    _mm512_mask_storeu_ps(ci + 16, m1, _mm512_add_ps(o1, acc[i][1]));
  }
}

}  // namespace ferry::ops::cpu::avx512bf16
