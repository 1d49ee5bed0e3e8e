// The SIMD quantized GEMV (see quant_kernels.h), written once for two ISAs: quant_linear_avx2.cc includes it with
// FERRY_QUANT_VNNI 0 (integer dot products through vpmaddubsw + vpmaddwd) and quant_linear_avx512.cc with
// FERRY_QUANT_VNNI 1 (one vpdpbusd, AVX-512 VNNI on 256-bit vectors). Everything here has internal linkage and no
// standard-library templates are instantiated, so no AVX-512 code can be shared with (and picked by the linker
// for) translation units built for plain AVX2.
//
// Per 32-element weight group the row loops below unpack the levels into 32 unsigned bytes (for q8_0: their
// magnitudes, the signs moving onto x with vpsignb) and call step(), which does the integer dot product against
// each activation row's block and accumulates d_x · a · dot in a vector and d_x · c · Σx_q in a scalar.
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

// Two independent sets of accumulators (S = 0, 1), used by alternate groups: one chain of dependent FMAs would
// make the loop wait on their latency rather than on memory.
template <int M>
struct Acc {
  __m256 v[2][M];
  float c[2][M];
};

// One 32-element weight group against the M activation blocks x[0], x[groups], ...: wq the unsigned levels (or
// magnitudes, kSigned, with wsign carrying the signs), a0/a1 and c0/c1 the scales and offsets of its two halves.
template <int M, bool kSigned, bool kTwoScales, int S>
inline void step(__m256i wq, __m256i wsign, float a0, float a1, float c0, float c1, const QBlock8* x, int64_t groups,
                 Acc<M>& acc) {
  FERRY_QUANT_UNROLL
  for (int m = 0; m < M; ++m) {
    const QBlock8& b = x[m * groups];
    __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.q));
    if constexpr (kSigned) xv = _mm256_sign_epi8(xv, wsign);
    const __m256 dot = _mm256_cvtepi32_ps(dot_u8s8(wq, xv));
    if constexpr (kTwoScales) {
      const __m256 scale = _mm256_mul_ps(_mm256_setr_ps(a0, a0, a0, a0, a1, a1, a1, a1), _mm256_set1_ps(b.d));
      acc.v[S][m] = _mm256_fmadd_ps(dot, scale, acc.v[S][m]);
      acc.c[S][m] += c0 * b.dsum[0] + c1 * b.dsum[1];
    } else {
      acc.v[S][m] = _mm256_fmadd_ps(dot, _mm256_set1_ps(a0 * b.d), acc.v[S][m]);
      if constexpr (!kSigned) acc.c[S][m] += c0 * b.dsum_all;
    }
  }
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

// The group loops of the 32-element types: decode(b, wq, wsign, a, c) unpacks one block; groups go in pairs onto
// the two accumulator sets.
template <int M, bool kSigned, int kBlockBytes, class Decode>
inline void row_32(const uint8_t* row, int64_t groups, const QBlock8* x, Acc<M>& acc, const Decode& decode) {
  int64_t g = 0;
  __m256i wq, ws{};
  float a, c;
  for (; g + 2 <= groups; g += 2) {
    prefetch_block<2 * kBlockBytes>(row + kBlockBytes * g);
    decode(row + kBlockBytes * g, wq, ws, a, c);
    step<M, kSigned, false, 0>(wq, ws, a, a, c, c, x + g, groups, acc);
    decode(row + kBlockBytes * (g + 1), wq, ws, a, c);
    step<M, kSigned, false, 1>(wq, ws, a, a, c, c, x + g + 1, groups, acc);
  }
  if (g < groups) {
    decode(row + kBlockBytes * g, wq, ws, a, c);
    step<M, kSigned, false, 0>(wq, ws, a, a, c, c, x + g, groups, acc);
  }
}

template <int M>
void row_q8_0(const uint8_t* row, int64_t groups, const QBlock8* x, Acc<M>& acc) {
  row_32<M, true, 34>(row, groups, x, acc, [](const uint8_t* b, __m256i& wq, __m256i& ws, float& a, float& c) {
    ws = load32(b + 2);
    wq = _mm256_abs_epi8(ws);
    a = f16_at(b), c = 0.0f;
  });
}

template <int M>
void row_q4_0(const uint8_t* row, int64_t groups, const QBlock8* x, Acc<M>& acc) {
  row_32<M, false, 18>(row, groups, x, acc, [](const uint8_t* b, __m256i& wq, __m256i&, float& a, float& c) {
    wq = nibbles16(b + 2);
    a = f16_at(b), c = -8.0f * a;
  });
}

template <int M>
void row_q4_1(const uint8_t* row, int64_t groups, const QBlock8* x, Acc<M>& acc) {
  row_32<M, false, 20>(row, groups, x, acc, [](const uint8_t* b, __m256i& wq, __m256i&, float& a, float& c) {
    wq = nibbles16(b + 4);
    a = f16_at(b), c = f16_at(b + 2);
  });
}

template <int M>
void row_q5_0(const uint8_t* row, int64_t groups, const QBlock8* x, Acc<M>& acc) {
  row_32<M, false, 22>(row, groups, x, acc, [](const uint8_t* b, __m256i& wq, __m256i&, float& a, float& c) {
    uint32_t qh;
    std::memcpy(&qh, b + 2, 4);
    wq = _mm256_or_si256(nibbles16(b + 6), fifth_bits(qh));
    a = f16_at(b), c = -16.0f * a;
  });
}

template <int M>
void row_q5_1(const uint8_t* row, int64_t groups, const QBlock8* x, Acc<M>& acc) {
  row_32<M, false, 24>(row, groups, x, acc, [](const uint8_t* b, __m256i& wq, __m256i&, float& a, float& c) {
    uint32_t qh;
    std::memcpy(&qh, b + 4, 4);
    wq = _mm256_or_si256(nibbles16(b + 8), fifth_bits(qh));
    a = f16_at(b), c = f16_at(b + 2);
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
        const __m256i bl = _mm256_set1_epi8(static_cast<char>(1 << (2 * p)));
        const __m256i bh = _mm256_set1_epi8(static_cast<char>(1 << (2 * p + 1)));
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bl), bl), b5));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bh), bh), b5));
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
        for (int m = 0; m < M; ++m) acc.v[s][m] = _mm256_setzero_ps(), acc.c[s][m] = 0.0f;
      switch (wt) {
        case DType::Q8_0: row_q8_0<M>(row, groups, x8, acc); break;
        case DType::Q4_0: row_q4_0<M>(row, groups, x8, acc); break;
        case DType::Q4_1: row_q4_1<M>(row, groups, x8, acc); break;
        case DType::Q5_0: row_q5_0<M>(row, groups, x8, acc); break;
        case DType::Q5_1: row_q5_1<M>(row, groups, x8, acc); break;
        default: return;
      }
      for (int m = 0; m < M; ++m) out[m] = hsum8(_mm256_add_ps(acc.v[0][m], acc.v[1][m])) + (acc.c[0][m] + acc.c[1][m]);
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
