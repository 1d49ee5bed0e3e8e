// The SIMD quantized GEMV (see quant_kernels.h), written once for two ISAs: quant_linear_avx2.cc includes it with
// FERRY_QUANT_VNNI 0 (integer dot products through vpmaddubsw + vpmaddwd) and quant_linear_avx512.cc with
// FERRY_QUANT_VNNI 1 (one vpdpbusd, AVX-512 VNNI on 256-bit vectors). Everything here has internal linkage and no
// standard-library templates are instantiated, so no AVX-512 code can be shared with (and picked by the linker
// for) translation units built for plain AVX2.
//
// Per 32-element weight group the row loops below unpack the levels into 32 unsigned bytes (for q8_0: their
// magnitudes, the signs moving onto x with vpsignb) and call step(), which does the integer dot product against
// each activation row's block and accumulates d_x · a · dot in a vector and d_x · c · Σx_q in a scalar.
#pragma once

#if !defined(FERRY_QUANT_NS) || !defined(FERRY_QUANT_VNNI)
#error "define FERRY_QUANT_NS and FERRY_QUANT_VNNI before including quant_simd.h"
#endif

#include <immintrin.h>

#include <cstring>

#include "quant_kernels.h"

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

inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// 16 bytes of packed nibbles -> 32 bytes: the low nibbles, then the high ones (q4_0/q4_1/q5 element order).
inline __m256i nibbles16(const uint8_t* p) {
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
}

// Byte i = 0x10 where bit i of qh is set (the 5th bit of q5 levels).
inline __m256i fifth_bits(uint32_t qh) {
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                        3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), shuf);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(0x10));
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

// The group loops of the 32-element types: decode(b, wq, wsign, a, c) unpacks one block; groups go in pairs onto
// the two accumulator sets.
template <int M, bool kSigned, int kBlockBytes, class Decode>
inline void row_32(const uint8_t* row, int64_t groups, const QBlock8* x, Acc<M>& acc, const Decode& decode) {
  int64_t g = 0;
  __m256i wq, ws{};
  float a, c;
  for (; g + 2 <= groups; g += 2) {
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

// Q4_K / Q5_K: per 256-element block, eight (scale, min) pairs; sub-blocks 2p and 2p + 1 are the low and high
// nibbles of the same 32 bytes (and go to accumulator sets 0 and 1).
template <int M, bool kFive>
void row_qk(const uint8_t* row, int64_t groups, const QBlock8* x, Acc<M>& acc) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), b5 = _mm256_set1_epi8(0x10);
  for (int64_t sb = 0; sb < groups / 8; ++sb) {
    const uint8_t* b = row + (kFive ? 176 : 144) * sb;
    const float d = f16_at(b), dmin = f16_at(b + 2);
    const uint8_t* sc = b + 4;
    const uint8_t* qs = b + (kFive ? 48 : 16);
    __m256i qh{};
    if constexpr (kFive) qh = load32(b + 16);
    const QBlock8* xs = x + 8 * sb;
    FERRY_QUANT_UNROLL
    for (int p = 0; p < 4; ++p) {
      int s[2], m[2];
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * p + h;
        if (j < 4) {
          s[h] = sc[j] & 63, m[h] = sc[j + 4] & 63;
        } else {
          s[h] = (sc[j + 4] & 0x0F) | ((sc[j - 4] >> 6) << 4);
          m[h] = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
        }
      }
      const __m256i v = load32(qs + 32 * p);
      __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      if constexpr (kFive) {
        const __m256i bl = _mm256_set1_epi8(static_cast<char>(1 << (2 * p)));
        const __m256i bh = _mm256_set1_epi8(static_cast<char>(1 << (2 * p + 1)));
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bl), bl), b5));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bh), bh), b5));
      }
      const float a0 = d * static_cast<float>(s[0]), c0 = -dmin * static_cast<float>(m[0]);
      const float a1 = d * static_cast<float>(s[1]), c1 = -dmin * static_cast<float>(m[1]);
      step<M, false, false, 0>(lo, __m256i{}, a0, a0, c0, c0, xs + 2 * p, groups, acc);
      step<M, false, false, 1>(hi, __m256i{}, a1, a1, c1, c1, xs + 2 * p + 1, groups, acc);
    }
  }
}

// Q6_K: per 256-element block two halves of 128; group gg of a half takes the low (gg < 2) or high nibbles of
// ql[32·(gg & 1) ...] and bits 2gg, 2gg + 1 of qh; each 16 elements have their own int8 scale.
template <int M>
void row_q6_k(const uint8_t* row, int64_t groups, const QBlock8* x, Acc<M>& acc) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
  for (int64_t sb = 0; sb < groups / 8; ++sb) {
    const uint8_t* b = row + 210 * sb;
    const float d = f16_at(b + 208);
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    FERRY_QUANT_UNROLL
    for (int half = 0; half < 2; ++half) {
      const __m256i lv0 = load32(b + 64 * half), lv1 = load32(b + 64 * half + 32);
      const __m256i hv = load32(b + 128 + 32 * half);
      const QBlock8* xs = x + 8 * sb + 4 * half;
      const int8_t* s = scales + 8 * half;
      // Groups 0..3: low nibbles of lv0 / lv1 with qh bits 0-1 / 2-3, then high nibbles with bits 4-5 / 6-7.
      const __m256i w0 = _mm256_or_si256(_mm256_and_si256(lv0, m4), _mm256_slli_epi16(_mm256_and_si256(hv, m2), 4));
      const __m256i w1 = _mm256_or_si256(_mm256_and_si256(lv1, m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 2), m2), 4));
      const __m256i w2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lv0, 4), m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 4), m2), 4));
      const __m256i w3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lv1, 4), m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 6), m2), 4));
      float a[8];
      for (int i = 0; i < 8; ++i) a[i] = d * static_cast<float>(s[i]);
      step<M, false, true, 0>(w0, __m256i{}, a[0], a[1], -32.0f * a[0], -32.0f * a[1], xs + 0, groups, acc);
      step<M, false, true, 1>(w1, __m256i{}, a[2], a[3], -32.0f * a[2], -32.0f * a[3], xs + 1, groups, acc);
      step<M, false, true, 0>(w2, __m256i{}, a[4], a[5], -32.0f * a[4], -32.0f * a[5], xs + 2, groups, acc);
      step<M, false, true, 1>(w3, __m256i{}, a[6], a[7], -32.0f * a[6], -32.0f * a[7], xs + 3, groups, acc);
    }
  }
}

template <int M>
void rows(DType wt, const void* w, int64_t K, const QBlock8* xq, const float* bias, float* y, int64_t ldy, int64_t n0,
          int64_t n1) {
  const int64_t groups = K / 32;
  const std::size_t row_bytes = dtype_nbytes(wt, K);
  for (int64_t n = n0; n < n1; ++n) {
    const auto* row = static_cast<const uint8_t*>(w) + static_cast<std::size_t>(n) * row_bytes;
    Acc<M> acc;
    for (int s = 0; s < 2; ++s)
      for (int m = 0; m < M; ++m) acc.v[s][m] = _mm256_setzero_ps(), acc.c[s][m] = 0.0f;
    switch (wt) {
      case DType::Q8_0: row_q8_0<M>(row, groups, xq, acc); break;
      case DType::Q4_0: row_q4_0<M>(row, groups, xq, acc); break;
      case DType::Q4_1: row_q4_1<M>(row, groups, xq, acc); break;
      case DType::Q5_0: row_q5_0<M>(row, groups, xq, acc); break;
      case DType::Q5_1: row_q5_1<M>(row, groups, xq, acc); break;
      case DType::Q4_K: row_qk<M, false>(row, groups, xq, acc); break;
      case DType::Q5_K: row_qk<M, true>(row, groups, xq, acc); break;
      case DType::Q6_K: row_q6_k<M>(row, groups, xq, acc); break;
      default: return;
    }
    for (int m = 0; m < M; ++m) {
      const float v = hsum8(_mm256_add_ps(acc.v[0][m], acc.v[1][m])) + (acc.c[0][m] + acc.c[1][m]);
      y[m * ldy + n] = bias ? v + bias[n] : v;
    }
  }
}

}  // namespace

void qgemv(DType wt, const void* w, int64_t K, const QBlock8* xq, int M, const float* bias, float* y, int64_t ldy,
           int64_t n0, int64_t n1) {
  switch (M) {
    case 1: return rows<1>(wt, w, K, xq, bias, y, ldy, n0, n1);
    case 2: return rows<2>(wt, w, K, xq, bias, y, ldy, n0, n1);
    case 3: return rows<3>(wt, w, K, xq, bias, y, ldy, n0, n1);
    default: return rows<4>(wt, w, K, xq, bias, y, ldy, n0, n1);
  }
}

}  // namespace ferry::ops::cpu::FERRY_QUANT_NS
