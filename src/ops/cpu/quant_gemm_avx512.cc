// The quantized GEMM's AVX-512 VNNI kernels (see quant_kernels.h): the weight unpacking into strips and the
// kQgMR × kQgNR microkernel.
#include <immintrin.h>

#include <cstring>

#include "ferry/core/quant.h"
#include "quant_kernels.h"
#include "quant_unpack_simd.h"

namespace ferry::ops::cpu::avx512 {
namespace {

// Elements 32u .. 32u + 31 of a weight row as unsigned levels q (the weight is a·q + c); a[h], c[h] for elements
// 16h .. 16h + 15 (equal halves except for q6_k).
struct Unit {
  __m256i q = _mm256_setzero_si256();
  float a[2] = {0.0f, 0.0f}, c[2] = {0.0f, 0.0f};
};

inline void set_ac(Unit& out, float a, float c) {
  out.a[0] = out.a[1] = a;
  out.c[0] = out.c[1] = c;
}

inline __m256i nibble_at(__m256i v, int high) {
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(4 * high)), _mm256_set1_epi8(0x0F));
}

void decode_unit(DType wt, const uint8_t* row, int64_t u, Unit& out) {
  switch (wt) {
    case DType::Q8_0: {
      const uint8_t* b = row + 34 * u;
      out.q = _mm256_xor_si256(load32(b + 2), _mm256_set1_epi8(static_cast<char>(0x80)));  // q + 128
      const float d = f16_at(b);
      return set_ac(out, d, -128.0f * d);
    }
    case DType::Q4_0: {
      const uint8_t* b = row + 18 * u;
      out.q = nibbles16(b + 2);
      const float d = f16_at(b);
      return set_ac(out, d, -8.0f * d);
    }
    case DType::Q4_1: {
      const uint8_t* b = row + 20 * u;
      out.q = nibbles16(b + 4);
      return set_ac(out, f16_at(b), f16_at(b + 2));
    }
    case DType::Q5_0: {
      const uint8_t* b = row + 22 * u;
      uint32_t qh;
      std::memcpy(&qh, b + 2, 4);
      out.q = _mm256_or_si256(nibbles16(b + 6), fifth_bits(qh));
      const float d = f16_at(b);
      return set_ac(out, d, -16.0f * d);
    }
    case DType::Q5_1: {
      const uint8_t* b = row + 24 * u;
      uint32_t qh;
      std::memcpy(&qh, b + 4, 4);
      out.q = _mm256_or_si256(nibbles16(b + 8), fifth_bits(qh));
      return set_ac(out, f16_at(b), f16_at(b + 2));
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      const bool five = wt == DType::Q5_K;
      const uint8_t* b = row + (five ? 176 : 144) * (u / 8);
      const int sub = static_cast<int>(u % 8);
      int s, m;
      scale_min_k4(sub, b + 4, s, m);
      out.q = nibble_at(load32(b + (five ? 48 : 16) + 32 * (sub / 2)), sub % 2);
      if (five) {
        const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << sub));
        out.q = _mm256_or_si256(out.q, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(load32(b + 16), bit), bit),
                                                        _mm256_set1_epi8(0x10)));
      }
      return set_ac(out, f16_at(b) * static_cast<float>(s), -f16_at(b + 2) * static_cast<float>(m));
    }
    case DType::Q6_K: {
      const uint8_t* b = row + 210 * (u / 8);
      const int sub = static_cast<int>(u % 8), half = sub / 4, gg = sub % 4;
      const __m256i lo = nibble_at(load32(b + 64 * half + 32 * (gg & 1)), gg < 2 ? 0 : 1);
      const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(load32(b + 128 + 32 * half), _mm_cvtsi32_si128(2 * gg)),
                                          _mm256_set1_epi8(3));
      out.q = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
      const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
      const float d = f16_at(b + 208);
      for (int h = 0; h < 2; ++h) {
        out.a[h] = d * static_cast<float>(scales[8 * half + 2 * gg + h]);
        out.c[h] = -32.0f * out.a[h];
      }
      return;
    }
    default: return;
  }
}

// Row r's G levels (from `q`) and scale / offset into group `dst` of a strip.
inline void put_group(uint8_t* dst, int G, int r, const uint8_t* q, float a, float c) {
  for (int ch = 0; ch < G / 4; ++ch) std::memcpy(dst + (ch * kQgNR + r) * 4, q + 4 * ch, 4);
  auto* scales = reinterpret_cast<float*>(dst + G * kQgNR);
  scales[r] = a;
  scales[kQgNR + r] = c;
}

template <int G>
void micro_t(int64_t ng, const uint8_t* xp, const uint8_t* wp, float* y, int64_t ldy, int mr, int nr, bool accumulate,
             const float* bias) {
  constexpr int MR = kQgMR;
  const int64_t xg_bytes = qgemm_x_group_bytes(G), wg_bytes = qgemm_w_group_bytes(G);
  const __mmask16 mask[2] = {static_cast<__mmask16>(nr >= 16 ? 0xFFFF : (1u << nr) - 1),
                             static_cast<__mmask16>(nr >= 32 ? 0xFFFF : nr > 16 ? (1u << (nr - 16)) - 1 : 0)};
  __m512 f[MR][2];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i)
    for (int h = 0; h < 2; ++h)
      f[i][h] = accumulate ? (i < mr ? _mm512_maskz_loadu_ps(mask[h], y + i * ldy + 16 * h) : _mm512_setzero_ps())
                : bias     ? _mm512_maskz_loadu_ps(mask[h], bias + 16 * h)
                           : _mm512_setzero_ps();
  for (int64_t g = 0; g < ng; ++g) {
    const uint8_t* xg = xp + g * xg_bytes;
    const uint8_t* wg = wp + g * wg_bytes;
    __m512i s[MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) s[i][0] = s[i][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int ch = 0; ch < G / 4; ++ch) {
      const __m512i w0 = _mm512_loadu_si512(wg + ch * 4 * kQgNR);
      const __m512i w1 = _mm512_loadu_si512(wg + ch * 4 * kQgNR + 64);
#pragma GCC unroll 6
      for (int i = 0; i < MR; ++i) {
        int xv;
        std::memcpy(&xv, xg + (ch * MR + i) * 4, 4);
        const __m512i xb = _mm512_set1_epi32(xv);
        s[i][0] = _mm512_dpbusd_epi32(s[i][0], w0, xb);
        s[i][1] = _mm512_dpbusd_epi32(s[i][1], w1, xb);
      }
    }
    const auto* ws = reinterpret_cast<const float*>(wg + G * kQgNR);
    const auto* xs = reinterpret_cast<const float*>(xg + G * MR);
    const __m512 a[2] = {_mm512_loadu_ps(ws), _mm512_loadu_ps(ws + 16)};
    const __m512 c[2] = {_mm512_loadu_ps(ws + kQgNR), _mm512_loadu_ps(ws + kQgNR + 16)};
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m512 dx = _mm512_set1_ps(xs[i]), sx = _mm512_set1_ps(xs[MR + i]);
      for (int h = 0; h < 2; ++h) {
        f[i][h] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, s[i][h]), _mm512_mul_ps(a[h], dx), f[i][h]);
        f[i][h] = _mm512_fmadd_ps(c[h], sx, f[i][h]);
      }
    }
  }
  for (int i = 0; i < mr; ++i)
    for (int h = 0; h < 2; ++h) _mm512_mask_storeu_ps(y + i * ldy + 16 * h, mask[h], f[i][h]);
}

}  // namespace

namespace {

void pack_w(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t g0, int64_t ng, uint8_t* strip,
            bool signed_levels) {
  const int G = qgemm_group(wt);
  const int offset = signed_levels ? qgemm_symmetric_offset(wt) : 0;
  const int64_t wg_bytes = qgemm_w_group_bytes(G);
  if (rows < kQgNR) std::memset(strip, 0, static_cast<std::size_t>(ng * wg_bytes));
  const std::size_t row_bytes = dtype_nbytes(wt, K);
  const int64_t u0 = g0 * G / 32, u1 = (g0 + ng) * G / 32;
  alignas(32) uint8_t q[32];
  Unit unit;
  for (int r = 0; r < rows; ++r) {
    const auto* row = static_cast<const uint8_t*>(w) + static_cast<std::size_t>(n0 + r) * row_bytes;
    for (int64_t u = u0; u < u1; ++u) {
      decode_unit(wt, row, u, unit);
      if (offset != 0) {  // a·u + c with c = −offset·a  →  a·(u − offset)
        unit.q = _mm256_sub_epi8(unit.q, _mm256_set1_epi8(static_cast<char>(offset)));
        unit.c[0] = unit.c[1] = 0.0f;
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(q), unit.q);
      if (G == 32) {
        put_group(strip + (u - u0) * wg_bytes, 32, r, q, unit.a[0], unit.c[0]);
      } else {
        put_group(strip + (2 * (u - u0)) * wg_bytes, 16, r, q, unit.a[0], unit.c[0]);
        put_group(strip + (2 * (u - u0) + 1) * wg_bytes, 16, r, q + 16, unit.a[1], unit.c[1]);
      }
    }
  }
}

}  // namespace

void qgemm_pack_w(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t g0, int64_t ng, uint8_t* strip) {
  pack_w(wt, w, K, n0, rows, g0, ng, strip, false);
}

void qgemm_pack_w_signed(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t g0, int64_t ng,
                         uint8_t* strip) {
  pack_w(wt, w, K, n0, rows, g0, ng, strip, true);
}

void qgemm_micro(int G, int64_t ng, const uint8_t* xp, const uint8_t* wp, float* y, int64_t ldy, int mr, int nr,
                 bool accumulate, const float* bias) {
  if (G == 16) return micro_t<16>(ng, xp, wp, y, ldy, mr, nr, accumulate, bias);
  micro_t<32>(ng, xp, wp, y, ldy, mr, nr, accumulate, bias);
}

}  // namespace ferry::ops::cpu::avx512
