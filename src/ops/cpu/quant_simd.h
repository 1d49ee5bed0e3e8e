// The SIMD quantized GEMV (see quant_kernels.h), written once for two ISAs: quant_linear_avx2.cc includes it with
// FERRY_QUANT_VNNI 0 (integer dot products through vpmaddubsw + vpmaddwd) and quant_linear_avx512.cc with
// FERRY_QUANT_VNNI 1 (one vpdpbusd, AVX-512 VNNI on 256-bit vectors). Everything here has internal linkage and no
// standard-library templates are instantiated, so no AVX-512 code can be shared with (and picked by the linker
// for) translation units built for plain AVX2.
//
// The row loops unpack weight levels into unsigned bytes (for q8_0: their magnitudes, the signs moving onto x with
// vpsignb) and do integer dot products against each activation row's blocks, converting to float once per group
// (q8_0), per two groups (q4_0, q4_1, q5_0, q5_1 against QPair8 activations) or per 256-element block (K-quants).
//
// One call serves up to FERRY_QUANT_MAX_ROWS activation rows per decoded weight group: 4 with AVX2's 16 vector
// registers (2 × 4 accumulators plus the decoded group and temporaries), 8 with AVX-512's 32 (the same 256-bit
// code, EVEX-encoded, reaches ymm16-31). Twice the rows halve the decoding and the weight loads per row.
#pragma once

#if !defined(FERRY_QUANT_NS) || !defined(FERRY_QUANT_VNNI) || !defined(FERRY_QUANT_MAX_ROWS)
#error "define FERRY_QUANT_NS, FERRY_QUANT_VNNI and FERRY_QUANT_MAX_ROWS before including quant_simd.h"
#endif

#include <immintrin.h>

#include <cstring>

#include "quant_kernels.h"
#include "quant_unpack_simd.h"

#define FERRY_QUANT_UNROLL _Pragma("GCC unroll 8")

namespace ferry::ops::cpu::FERRY_QUANT_NS {
namespace {

inline __m256i dot_u8s8(__m256i u, __m256i s) {
#if FERRY_QUANT_VNNI
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Software prefetch of the weight stream, this many bytes ahead of the block being decoded. The loops spend many
// instructions per byte loaded (~70 per 144-byte q4_k block), so the out-of-order window holds too few of their loads
// for one core to keep enough misses in flight: on Zen 2 (AVX2), one thread streamed 10 GB/s through the q4_k GEMV
// against 25 GB/s for a plain read; with the prefetch, 2 threads went from 0.61-0.64 to 0.77-0.80 of the read
// bandwidth (q4_k) and from 0.68-0.70 to 0.81-0.88 (q8_0). Prefetches past the end of the matrix never fault.
constexpr int kPrefetchAhead = 2048;

template <int kBytes>
inline void prefetch_block(const uint8_t* b) {
  FERRY_QUANT_UNROLL
  for (int off = 0; off < kBytes; off += 64)
    _mm_prefetch(reinterpret_cast<const char*>(b) + kPrefetchAhead + off, _MM_HINT_T0);
}

// ---- Q8_0 against QBlock8 activations -----------------------------------------------------------------------

// Two independent sets of accumulators (S = 0, 1), used by alternate groups (q8_0) or pairs of groups (q4_0 ...
// q5_1, whose offsets c · d_x · Σx_q go into the same vectors): one chain of dependent FMAs would make the loop wait
// on their latency rather than on memory.
template <int M>
struct Acc {
  __m256 v[2][M];
};

// One group: the magnitudes of its int8 levels (unsigned bytes) times x with the levels' signs moved onto it
// (vpsignb), scaled by a · d_x.
template <int M, int S>
inline void step_q8(__m256i wabs, __m256i wsign, float a, const QBlock8* x, int64_t groups, Acc<M>& acc) {
  FERRY_QUANT_UNROLL
  for (int m = 0; m < M; ++m) {
    const QBlock8& b = x[m * groups];
    const __m256i xv = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.q)), wsign);
    acc.v[S][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_u8s8(wabs, xv)), _mm256_set1_ps(a * b.d), acc.v[S][m]);
  }
}

template <int M>
void row_q8_0(const uint8_t* row, int64_t groups, const QBlock8* x, Acc<M>& acc) {
  constexpr int kBlockBytes = 34;
  int64_t g = 0;
  for (; g + 2 <= groups; g += 2) {
    const uint8_t* b = row + kBlockBytes * g;
    prefetch_block<2 * kBlockBytes>(b);
    const __m256i s0 = load32(b + 2), s1 = load32(b + kBlockBytes + 2);
    step_q8<M, 0>(_mm256_abs_epi8(s0), s0, f16_at(b), x + g, groups, acc);
    step_q8<M, 1>(_mm256_abs_epi8(s1), s1, f16_at(b + kBlockBytes), x + g + 1, groups, acc);
  }
  if (g < groups) {
    const uint8_t* b = row + kBlockBytes * g;
    const __m256i s0 = load32(b + 2);
    step_q8<M, 0>(_mm256_abs_epi8(s0), s0, f16_at(b), x + g, groups, acc);
  }
}

// ---- The 4/5-bit 32-element types against QPair8 activations: two groups per step -------------------------------

// Weight groups A and B (blocks bA, bB) decoded together: lo = A's 16 low nibbles then B's (elements 0-15 of each),
// hi = their high nibbles (elements 16-31); a and c hold the scales and offsets lane by lane (A's in the low 128-bit
// lane, B's in the high one).
struct Pair {
  __m256i lo, hi;
  __m256 a, c;
};

inline void unpack_pair_nibbles(const uint8_t* qa, const uint8_t* qb, Pair& p) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qa));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qb));
  const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
  p.lo = _mm256_and_si256(v, m4);
  p.hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
}

// The two f16 at the start of each block (d, and for q4_1 / q5_1 the min m) as [d_A ×4, d_B ×4] and [m_A ×4, m_B ×4].
template <bool kMin>
inline void unpack_pair_scales(const uint8_t* ba, const uint8_t* bb, Pair& p) {
  uint32_t ua, ub;
  std::memcpy(&ua, ba, 4), std::memcpy(&ub, bb, 4);
  const __m256 f = _mm256_castps128_ps256(
      _mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(ua)), static_cast<int>(ub), 1)));
  p.a = _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2));
  if constexpr (kMin) p.c = _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3));
}

// The fifth bits of q5 levels (32 bits per block, bit i for element i) ORed in as 0x10.
inline void add_pair_fifth_bits(const uint8_t* qha, const uint8_t* qhb, Pair& p) {
  uint32_t ha, hb;
  std::memcpy(&ha, qha, 4), std::memcpy(&hb, qhb, 4);
  const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_cvtsi32_si128(static_cast<int>(ha))),
                                            _mm_cvtsi32_si128(static_cast<int>(hb)), 1);
  // Bytes 0-1 of each lane's qh hold the bits of elements 0-15 (lo), bytes 2-3 those of 16-31 (hi).
  const __m256i sel_lo = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1,
                                          1, 1, 1, 1, 1, 1);
  const __m256i sel_hi = _mm256_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                          3, 3, 3, 3, 3, 3);
  p.lo = _mm256_or_si256(p.lo, spread_bits_to_0x10(_mm256_shuffle_epi8(h, sel_lo)));
  p.hi = _mm256_or_si256(p.hi, spread_bits_to_0x10(_mm256_shuffle_epi8(h, sel_hi)));
}

// Σ lo·x[0..31] + hi·x[32..63] in int32 lanes (lanes 0-3 sum to A's dot product, 4-7 to B's). The two vpmaddubsw
// results are added in int16 before widening: each pair sum is at most 2 · 31 · 128 = 7936, two of them 15872.
inline __m256i dot_pair(const Pair& p, const QPair8& x) {
  const auto* q = reinterpret_cast<const uint8_t*>(x.q);
  const __m256i xl = load32(q), xh = load32(q + 32);
#if FERRY_QUANT_VNNI
  return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), p.lo, xl), p.hi, xh);
#else
  return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(p.lo, xl), _mm256_maddubs_epi16(p.hi, xh)),
                           _mm256_set1_epi16(1));
#endif
}

template <int M, int S>
inline void step_pair(const Pair& p, const QPair8* x, int64_t pairs, Acc<M>& acc) {
  FERRY_QUANT_UNROLL
  for (int m = 0; m < M; ++m) {
    const QPair8& b = x[m * pairs];
    const __m256 scale = _mm256_mul_ps(p.a, _mm256_loadu_ps(b.d));
    const __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_pair(p, b)), scale, acc.v[S][m]);
    acc.v[S][m] = _mm256_fmadd_ps(p.c, _mm256_loadu_ps(b.dsum), v);
  }
}

// Past the end of a row with an odd number of groups, B is this all-zero block (scale 0; its activations are zero
// too).
alignas(64) constexpr uint8_t kZeroBlock[32] = {};

// The pair loop: decode(bA, bB, pair) unpacks two blocks of kBlockBytes; pairs go alternately onto the two
// accumulator sets.
template <int M, int kBlockBytes, class Decode>
inline void row_pairs(const uint8_t* row, int64_t groups, const QPair8* x, Acc<M>& acc, const Decode& decode) {
  const int64_t pairs = (groups + 1) / 2;
  Pair p;
  int64_t i = 0;
  for (; i + 2 <= groups / 2; i += 2) {
    const uint8_t* b = row + 2 * kBlockBytes * i;
    prefetch_block<4 * kBlockBytes>(b);
    decode(b, b + kBlockBytes, p);
    step_pair<M, 0>(p, x + i, pairs, acc);
    decode(b + 2 * kBlockBytes, b + 3 * kBlockBytes, p);
    step_pair<M, 1>(p, x + i + 1, pairs, acc);
  }
  for (; i < pairs; ++i) {
    const uint8_t* b = row + 2 * kBlockBytes * i;
    decode(b, 2 * i + 1 < groups ? b + kBlockBytes : kZeroBlock, p);
    step_pair<M, 0>(p, x + i, pairs, acc);
  }
}

template <int M>
void row_q4_0(const uint8_t* row, int64_t groups, const QPair8* x, Acc<M>& acc) {
  row_pairs<M, 18>(row, groups, x, acc, [](const uint8_t* a, const uint8_t* b, Pair& p) {
    unpack_pair_nibbles(a + 2, b + 2, p);
    unpack_pair_scales<false>(a, b, p);
    p.c = _mm256_mul_ps(p.a, _mm256_set1_ps(-8.0f));
  });
}

template <int M>
void row_q4_1(const uint8_t* row, int64_t groups, const QPair8* x, Acc<M>& acc) {
  row_pairs<M, 20>(row, groups, x, acc, [](const uint8_t* a, const uint8_t* b, Pair& p) {
    unpack_pair_nibbles(a + 4, b + 4, p);
    unpack_pair_scales<true>(a, b, p);
  });
}

template <int M>
void row_q5_0(const uint8_t* row, int64_t groups, const QPair8* x, Acc<M>& acc) {
  row_pairs<M, 22>(row, groups, x, acc, [](const uint8_t* a, const uint8_t* b, Pair& p) {
    unpack_pair_nibbles(a + 6, b + 6, p);
    add_pair_fifth_bits(a + 2, b + 2, p);
    unpack_pair_scales<false>(a, b, p);
    p.c = _mm256_mul_ps(p.a, _mm256_set1_ps(-16.0f));
  });
}

template <int M>
void row_q5_1(const uint8_t* row, int64_t groups, const QPair8* x, Acc<M>& acc) {
  row_pairs<M, 24>(row, groups, x, acc, [](const uint8_t* a, const uint8_t* b, Pair& p) {
    unpack_pair_nibbles(a + 8, b + 8, p);
    add_pair_fifth_bits(a + 4, b + 4, p);
    unpack_pair_scales<true>(a, b, p);
  });
}

// ---- K-quants against QBlockK activations: integer sums over a whole 256-element block ------------------------

// Σ pairs of int16 × int16 scales, accumulated into int32 lanes.
inline __m256i madd_acc(__m256i acc, __m256i p16, __m256i scale16) {
#if FERRY_QUANT_VNNI
  return _mm256_dpwssd_epi32(acc, p16, scale16);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, scale16));
#endif
}

// A vector whose low 128-bit lane repeats int16 element `lo` of a register holding eight int16 (in both lanes) and
// whose high lane repeats element `hi` (a vpshufb pattern; constant when lo and hi are).
inline __m256i pick16(int lo, int hi) {
  const char a = static_cast<char>(2 * lo), b = static_cast<char>(2 * lo + 1);
  const char c = static_cast<char>(2 * hi), e = static_cast<char>(2 * hi + 1);
  return _mm256_setr_epi8(a, b, a, b, a, b, a, b, a, b, a, b, a, b, a, b, c, e, c, e, c, e, c, e, c, e, c, e, c, e, c, e);
}

template <int M>
struct AccK {
  __m256 v[M];
};

// Q4_K / Q5_K: eight 32-element sub-blocks with 6-bit scales sc_j and mins m_j (12 packed bytes); sub-blocks 2p and
// 2p + 1 are the low and high nibbles of the same 32 bytes. Per block and activation row:
//   d·d_x·Σ_j sc_j·Σ q·x_q − dmin·d_x·Σ_j m_j·Σ x_q   (both inner sums in integers).
template <int M, bool kFive>
void row_qk(const uint8_t* row, int64_t nsb, const QBlockK* x, AccK<M>& acc) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), b5 = _mm256_set1_epi8(0x10);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* b = row + (kFive ? 176 : 144) * sb;
    prefetch_block<kFive ? 176 : 144>(b);
    const float d = f16_at(b), dmin = f16_at(b + 2);
    uint32_t u[3];
    std::memcpy(u, b + 4, 12);
    const uint32_t s_lo = u[0] & 0x3F3F3F3Fu, m_lo = u[1] & 0x3F3F3F3Fu;
    const uint32_t s_hi = (u[2] & 0x0F0F0F0Fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    const uint32_t m_hi = ((u[2] >> 4) & 0x0F0F0F0Fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    const __m256i sc16 = _mm256_broadcastsi128_si256(
        _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int>(s_hi), static_cast<int>(s_lo))));
    // Each min twice (m_0 m_0 m_1 m_1 ...), one per 16-element half sum of the activations.
    const __m128i mn8 = _mm_set_epi32(0, 0, static_cast<int>(m_hi), static_cast<int>(m_lo));
    const __m256i mn16x2 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
    const QBlockK* xb[M];
    __m256i isum[M];
    FERRY_QUANT_UNROLL
    for (int m = 0; m < M; ++m) {
      xb[m] = x + m * nsb + sb;
      // − dmin · d_x · Σ_j m_j · (Σ x_q over sub-block j), in the same vector accumulator (summed at the end).
      const __m256i mins = _mm256_madd_epi16(mn16x2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[m]->bsum)));
      acc.v[m] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(dmin * xb[m]->d), acc.v[m]);
      isum[m] = _mm256_setzero_si256();
    }
    const uint8_t* qs = b + (kFive ? 48 : 16);
    __m256i qh{};
    if constexpr (kFive) qh = load32(b + 16);
    FERRY_QUANT_UNROLL
    for (int p = 0; p < 4; ++p) {
      const __m256i v = load32(qs + 32 * p);
      __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      if constexpr (kFive) {
        // Bits 2p and 2p + 1 of each qh byte moved to bit 4 (0x10) by a 16-bit shift: within a byte for shifts of
        // up to 4 left or 3 right, and what crosses into the neighbouring byte lands outside bit 4.
        const __m256i l5 = p <= 2 ? _mm256_slli_epi16(qh, 4 - 2 * p) : _mm256_srli_epi16(qh, 2);
        const __m256i h5 = p <= 1 ? _mm256_slli_epi16(qh, 3 - 2 * p) : _mm256_srli_epi16(qh, 2 * p - 3);
        lo = _mm256_or_si256(lo, _mm256_and_si256(l5, b5));
        hi = _mm256_or_si256(hi, _mm256_and_si256(h5, b5));
      }
      const __m256i s_a = _mm256_shuffle_epi8(sc16, pick16(2 * p, 2 * p));
      const __m256i s_b = _mm256_shuffle_epi8(sc16, pick16(2 * p + 1, 2 * p + 1));
      FERRY_QUANT_UNROLL
      for (int m = 0; m < M; ++m) {
        const __m256i xa = load32(reinterpret_cast<const uint8_t*>(xb[m]->q) + 64 * p);
        const __m256i xc = load32(reinterpret_cast<const uint8_t*>(xb[m]->q) + 64 * p + 32);
        isum[m] = madd_acc(isum[m], _mm256_maddubs_epi16(lo, xa), s_a);
        isum[m] = madd_acc(isum[m], _mm256_maddubs_epi16(hi, xc), s_b);
      }
    }
    FERRY_QUANT_UNROLL
    for (int m = 0; m < M; ++m)
      acc.v[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]), _mm256_set1_ps(d * xb[m]->d), acc.v[m]);
  }
}

// Q6_K: two halves of 128; group gg of a half takes the low (gg < 2) or high nibbles of ql[32·(gg & 1) ...] and bits
// 2gg, 2gg + 1 of qh; each 16 elements have an int8 scale. Per block and activation row, in integers:
//   Σ_i s_i · Σ (q − 32)·x_q  =  Σ_i s_i · Σ q·x_q − 32 · Σ_i s_i · bsum_i,   times d · d_x once.
template <int M>
void row_q6_k(const uint8_t* row, int64_t nsb, const QBlockK* x, AccK<M>& acc) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* b = row + 210 * sb;
    prefetch_block<210>(b);
    const float d = f16_at(b + 208);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
    const __m256i sc_all = _mm256_cvtepi8_epi16(sc8);  // the 16 scales as int16, in order
    const __m256i sc_half[2] = {_mm256_broadcastsi128_si256(_mm256_castsi256_si128(sc_all)),
                                _mm256_broadcastsi128_si256(_mm256_extracti128_si256(sc_all, 1))};
    const QBlockK* xb[M];
    __m256i isum[M];
    FERRY_QUANT_UNROLL
    for (int m = 0; m < M; ++m) {
      xb[m] = x + m * nsb + sb;
      const __m256i off = _mm256_madd_epi16(sc_all, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[m]->bsum)));
      isum[m] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
    }
    FERRY_QUANT_UNROLL
    for (int half = 0; half < 2; ++half) {
      const __m256i lv0 = load32(b + 64 * half), lv1 = load32(b + 64 * half + 32);
      const __m256i hv = load32(b + 128 + 32 * half);
      __m256i w[4];
      w[0] = _mm256_or_si256(_mm256_and_si256(lv0, m4), _mm256_slli_epi16(_mm256_and_si256(hv, m2), 4));
      w[1] = _mm256_or_si256(_mm256_and_si256(lv1, m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 2), m2), 4));
      w[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lv0, 4), m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 4), m2), 4));
      w[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lv1, 4), m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 6), m2), 4));
      FERRY_QUANT_UNROLL
      for (int gg = 0; gg < 4; ++gg) {
        const __m256i s = _mm256_shuffle_epi8(sc_half[half], pick16(2 * gg, 2 * gg + 1));
        FERRY_QUANT_UNROLL
        for (int m = 0; m < M; ++m) {
          const __m256i xv = load32(reinterpret_cast<const uint8_t*>(xb[m]->q) + 128 * half + 32 * gg);
          isum[m] = madd_acc(isum[m], _mm256_maddubs_epi16(w[gg], xv), s);
        }
      }
    }
    FERRY_QUANT_UNROLL
    for (int m = 0; m < M; ++m)
      acc.v[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]), _mm256_set1_ps(d * xb[m]->d), acc.v[m]);
  }
}

template <int M>
void rows(DType wt, const void* w, int64_t K, const void* xq, const float* bias, float* y, int64_t ldy, int64_t n0,
          int64_t n1) {
  const int64_t groups = K / 32;
  const std::size_t row_bytes = dtype_nbytes(wt, K);
  const auto* x8 = static_cast<const QBlock8*>(xq);
  const auto* xk = static_cast<const QBlockK*>(xq);
  const auto* xp = static_cast<const QPair8*>(xq);
  for (int64_t n = n0; n < n1; ++n) {
    const auto* row = static_cast<const uint8_t*>(w) + static_cast<std::size_t>(n) * row_bytes;
    float out[M];
    if (wt == DType::Q4_K || wt == DType::Q5_K || wt == DType::Q6_K) {
      AccK<M> acc;
      for (int m = 0; m < M; ++m) acc.v[m] = _mm256_setzero_ps();
      if (wt == DType::Q4_K) row_qk<M, false>(row, groups / 8, xk, acc);
      else if (wt == DType::Q5_K) row_qk<M, true>(row, groups / 8, xk, acc);
      else row_q6_k<M>(row, groups / 8, xk, acc);
      for (int m = 0; m < M; ++m) out[m] = hsum8(acc.v[m]);
    } else {
      Acc<M> acc;
      for (int s = 0; s < 2; ++s)
        for (int m = 0; m < M; ++m) acc.v[s][m] = _mm256_setzero_ps();
      switch (wt) {
        case DType::Q8_0: row_q8_0<M>(row, groups, x8, acc); break;
        case DType::Q4_0: row_q4_0<M>(row, groups, xp, acc); break;
        case DType::Q4_1: row_q4_1<M>(row, groups, xp, acc); break;
        case DType::Q5_0: row_q5_0<M>(row, groups, xp, acc); break;
        case DType::Q5_1: row_q5_1<M>(row, groups, xp, acc); break;
        default: return;
      }
      for (int m = 0; m < M; ++m) out[m] = hsum8(_mm256_add_ps(acc.v[0][m], acc.v[1][m]));
    }
    for (int m = 0; m < M; ++m) y[m * ldy + n] = bias ? out[m] + bias[n] : out[m];
  }
}

}  // namespace

void qgemv(DType wt, const void* w, int64_t K, const void* xq, int M, const float* bias, float* y, int64_t ldy,
           int64_t n0, int64_t n1) {
  switch (M) {
    case 1: return rows<1>(wt, w, K, xq, bias, y, ldy, n0, n1);
    case 2: return rows<2>(wt, w, K, xq, bias, y, ldy, n0, n1);
    case 3: return rows<3>(wt, w, K, xq, bias, y, ldy, n0, n1);
#if FERRY_QUANT_MAX_ROWS >= 8
    case 4: return rows<4>(wt, w, K, xq, bias, y, ldy, n0, n1);
    case 5: return rows<5>(wt, w, K, xq, bias, y, ldy, n0, n1);
    case 6: return rows<6>(wt, w, K, xq, bias, y, ldy, n0, n1);
    case 7: return rows<7>(wt, w, K, xq, bias, y, ldy, n0, n1);
    default: return rows<8>(wt, w, K, xq, bias, y, ldy, n0, n1);
#else
    default: return rows<4>(wt, w, K, xq, bias, y, ldy, n0, n1);
#endif
  }
}

}  // namespace ferry::ops::cpu::FERRY_QUANT_NS
