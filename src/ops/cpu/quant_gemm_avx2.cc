// The quantized GEMM's AVX2 kernels (see quant_kernels.h): the weight unpacking into strips and the kQg2MR × kQg2NR
// (4 × 16) microkernel, for CPUs without AVX-512 VNNI (Intel before Ice Lake, AMD Zen 2 / 3). The layouts and the
// arithmetic are the AVX-512 kernels' (quant_gemm_avx512.cc): per G-element group, exact integer sums Σ u·x_q of
// unsigned weight levels and int8 activation levels, then y += a · d_x · Σ + c · s_x in f32 once per group for 8
// weight rows (one vector).
//
// The integer sums. AVX2 has no vpdpbusd; vpmaddubsw multiplies unsigned × signed bytes and adds adjacent pairs into
// int16 *with saturation*. A vector holds 4 levels of each of 8 weight rows; against a broadcast of 4 activation
// levels, vpmaddubsw gives two pair sums per row, and those add up in int16 (vpaddw) over D chunks before one
// vpmaddwd against ones widens them to int32. D is what no lane can overflow: a lane gains two products per chunk,
// each at most max_level · 127 (the activation quantizer maps the largest magnitude to ±127), so
//   q4_0 / q4_1 / q4_k (levels ≤ 15): D = 8, the whole group (≤ 16 · 15 · 127 = 30480);
//   q5_0 / q5_1 / q5_k (≤ 31): D = 4 (≤ 31496);   q6_k (≤ 63, 16-element groups): D = 2 (≤ 32004).
// q8_0's levels are signed and would be 0..255 as unsigned (q + 128: a pair sum up to 64770 saturates), so they stay
// signed, and the sign moves onto the activation: vpmaddubsw(|w|, vpsignb(x, w)), a pair sum ≤ 2 · 128 · 127 = 32512,
// widened by vpmaddwd every chunk (the offset c is then 0). Measured alternatives for q8_0 (microkernel, GOP/s): this
// 130; int16 levels through vpmaddwd 113 (twice the loads); q + 128 as two nibble planes 79 (twice the int16 sums:
// registers). tests/ops/quant_gemm_test.cc holds every type at the bounds (all levels at their maximum, every
// activation ±127); twice the D fails it (checked for q5_* and q6_k).
//
// The tile: 4 activation rows × 2 vectors keeps 8 running sums + 8 f32 accumulators + 2 weight vectors + the
// broadcast (+ 8 int32 sums for q5 / q6_k); GCC spills some of them around the once-per-group float step, and yet
// this measured best: 3 × 16 (no spills for q4) the same for q4 and 15-20% slower for q5 / q6_k, 4 × 8 and 6 × 8
// 15-30% slower, 2 × 24 and 1 × 32 over 60% slower. Microkernel on one Zen 4 core (AVX2 code; strip in L1, panels
// in L1/L2): q4_0 / q4_k 255, q5_0 240, q6_k 176, q8_0 130 GOP/s.
//
// The packing works 8 rows at a time: each row's 32 levels of a unit are one vector, and an 8 × 8 transpose of their
// dwords gives the strip's chunks directly (scales likewise). Unpacking weights, the GEMM's one pass over them, then
// takes 11-20% of its time at M = 64 (q8_0 .. q6_k; row by row with 4-byte copies it was ~30% for q6_k), 3-5% at
// M = 512.
//
// Against the GEMV tiles (bench/bench_quant_gemm.cc: 2048 × 2048, 2 threads of a 2-core Zen 4 VM running these
// AVX2 kernels, other builds sharing it; the tiles' time ÷ the GEMM's, median of 5 runs of alternating passes):
//            M = 8     16     32     48     64    512    GOP/s at 512, GEMM / tiles (a quiet run)
//   q8_0     0.87   1.18   1.37   1.50   1.62   1.76    205 / 117
//   q4_0     0.97   1.54   2.04   2.37   2.19   2.78    291 / 105
//   q4_1     1.14   1.66   1.87   2.52   2.69   3.00    312 / 103
//   q5_0     1.23   1.48   2.41   3.08   2.65   3.07    302 /  97
//   q5_1     1.33   1.69   2.55   2.74   2.95   3.36    289 /  86
//   q4_k     0.96   1.34   1.66   2.03   2.08   2.34    343 / 148
//   q5_k     1.02   1.50   1.93   2.27   2.26   2.50    321 / 124
//   q6_k     0.63   0.85   1.09   1.22   1.29   1.49    238 / 159
// (another run: M = 8 for q4_0 / q4_1 / q5_0 / q5_1 1.12 / 1.17 / 1.18 / 1.25, one thread 1.1-1.5; q6_k one thread
// 0.91-1.02 at 32, 1.07-1.11 at 48). These were this code on Zen 4 (FERRY_ISA=avx2) and the GEMV of one group per
// step; quant_gemm_min_rows now holds the crossovers measured on an AVX2-only Zen 2 against the paired q4/q5 GEMV
// (quant_gemm.cc). One thread at M = 512 (best of 25 alternating runs):
// these kernels 210-231 GOP/s for the 4- and 5-bit types, 161 for q6_k, 117 for q8_0; the AVX2 GEMV tiles 58-93,
// 103, 67; the AVX-512 VNNI kernels 282-293, 222, 272.
#include <immintrin.h>

#include <cstring>

#include "quant_kernels.h"
#include "quant_unpack_simd.h"

namespace ferry::ops::cpu::avx2 {
namespace {

// Bytes per block of each type, and 32-element units per block.
template <DType kType>
constexpr int block_bytes() {
  switch (kType) {
    case DType::Q8_0: return 34;
    case DType::Q4_0: return 18;
    case DType::Q4_1: return 20;
    case DType::Q5_0: return 22;
    case DType::Q5_1: return 24;
    case DType::Q4_K: return 144;
    case DType::Q5_K: return 176;
    default: return 210;
  }
}
template <DType kType>
constexpr int block_units() {  // 32-element units per block
  return kType == DType::Q4_K || kType == DType::Q5_K || kType == DType::Q6_K ? 8 : 1;
}

// Levels 32·sub .. 32·sub + 31 of block b: unsigned for every type but q8_0, whose levels stay signed.
template <DType kType>
inline __m256i levels(const uint8_t* b, int sub) {
  if constexpr (kType == DType::Q8_0) {
    return load32(b + 2);
  } else if constexpr (kType == DType::Q4_0) {
    return nibbles16(b + 2);
  } else if constexpr (kType == DType::Q4_1) {
    return nibbles16(b + 4);
  } else if constexpr (kType == DType::Q5_0 || kType == DType::Q5_1) {
    constexpr int off = kType == DType::Q5_0 ? 2 : 4;
    uint32_t qh;
    std::memcpy(&qh, b + off, 4);
    return _mm256_or_si256(nibbles16(b + off + 4), fifth_bits(qh));
  } else if constexpr (kType == DType::Q4_K || kType == DType::Q5_K) {
    constexpr bool kFive = kType == DType::Q5_K;
    const __m256i v = load32(b + (kFive ? 48 : 16) + 32 * (sub / 2));
    __m256i q = _mm256_and_si256(sub % 2 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0F));
    if constexpr (kFive) {
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << sub));
      q = _mm256_or_si256(q, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(load32(b + 16), bit), bit),
                                              _mm256_set1_epi8(0x10)));
    }
    return q;
  } else {
    static_assert(kType == DType::Q6_K);
    // Sub-block `sub` (half = sub / 4, gg = sub % 4): the low (gg < 2) or high nibbles of ql[64·half + 32·(gg & 1)]
    // and bits 2gg, 2gg + 1 of qh[32·half].
    const int half = sub / 4, gg = sub % 4;
    const __m256i l = load32(b + 64 * half + 32 * (gg & 1));
    const __m256i lo = _mm256_and_si256(gg < 2 ? l : _mm256_srli_epi16(l, 4), _mm256_set1_epi8(0x0F));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(load32(b + 128 + 32 * half), 2 * gg), _mm256_set1_epi8(3));
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
  }
}

// The scale a and offset c (the weight is a·level + c) of each GEMM group of block b, for one row: a[0], c[0] for
// the 32-element types; a[0..7], c[0..7] as vectors for q4_k / q5_k; a[0..15], c[0..15] for q6_k.
template <DType kType>
inline void block_scales(const uint8_t* b, __m256 a[2], __m256 c[2]) {
  if constexpr (kType == DType::Q8_0) {
    a[0] = _mm256_set1_ps(f16_at(b)), c[0] = _mm256_setzero_ps();
  } else if constexpr (kType == DType::Q4_0 || kType == DType::Q5_0) {
    const float d = f16_at(b);
    a[0] = _mm256_set1_ps(d), c[0] = _mm256_set1_ps((kType == DType::Q4_0 ? -8.0f : -16.0f) * d);
  } else if constexpr (kType == DType::Q4_1 || kType == DType::Q5_1) {
    a[0] = _mm256_set1_ps(f16_at(b)), c[0] = _mm256_set1_ps(f16_at(b + 2));
  } else if constexpr (kType == DType::Q4_K || kType == DType::Q5_K) {
    // The 6-bit scales and mins of the eight sub-blocks, unpacked as scale_min_k4 does (the GEMV's bit moves).
    uint32_t u[3];
    std::memcpy(u, b + 4, 12);
    const uint32_t s_lo = u[0] & 0x3F3F3F3Fu, m_lo = u[1] & 0x3F3F3F3Fu;
    const uint32_t s_hi = (u[2] & 0x0F0F0F0Fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    const uint32_t m_hi = ((u[2] >> 4) & 0x0F0F0F0Fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    const __m256 sc = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, static_cast<int>(s_hi), static_cast<int>(s_lo))));
    const __m256 mn = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, static_cast<int>(m_hi), static_cast<int>(m_lo))));
    a[0] = _mm256_mul_ps(_mm256_set1_ps(f16_at(b)), sc);
    c[0] = _mm256_mul_ps(_mm256_set1_ps(-f16_at(b + 2)), mn);
  } else {
    static_assert(kType == DType::Q6_K);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
    const __m256 d = _mm256_set1_ps(f16_at(b + 208));
    a[0] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8)));
    a[1] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8))));
    c[0] = _mm256_mul_ps(_mm256_set1_ps(-32.0f), a[0]);
    c[1] = _mm256_mul_ps(_mm256_set1_ps(-32.0f), a[1]);
  }
}

// v[r] (8 rows of 8 dwords) -> v[j] = dword j of rows 0..7: the 8 × 8 transpose of 32-bit elements.
inline void transpose8(__m256i v[8]) {
  __m256i t[8], s[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    s[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    s[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    s[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    s[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_permute2x128_si256(s[j], s[4 + j], 0x20);
    v[4 + j] = _mm256_permute2x128_si256(s[j], s[4 + j], 0x31);
  }
}

// Eight rows' vectors of 8 floats -> out[j][r] = element j of row r's vector, stored at dst + j·stride (floats).
inline void store_transposed(const __m256 rows[8], float* dst, int64_t stride) {
  __m256i v[8];
  for (int r = 0; r < 8; ++r) v[r] = _mm256_castps_si256(rows[r]);
  transpose8(v);
  for (int j = 0; j < 8; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j * stride), v[j]);
}

// Block by block and 8 rows at a time: each row's levels of a 32-element unit are one vector, an 8 × 8 transpose of
// their dwords gives the strip's chunks (4 elements × 8 rows) directly, and the rows' scale vectors transpose the
// same way into the per-group scale arrays. Rows past `rows` are zero.
template <DType kType>
void pack_w_t(const void* w, int64_t K, int64_t n0, int rows, int64_t g0, int64_t ng, uint8_t* strip) {
  constexpr int G = kType == DType::Q6_K ? 16 : 32, NR = kQg2NR, U = block_units<kType>();
  constexpr int kGroupsPerBlock = U * 32 / G;  // 1, 8 or 16
  const int64_t wg_bytes = qgemm_w_group_bytes(G, NR);
  const std::size_t row_bytes = dtype_nbytes(kType, K);
  const int64_t blk0 = g0 * G / (32 * U), blk1 = (g0 + ng) * G / (32 * U);
  for (int r0 = 0; r0 < NR; r0 += 8) {
    const uint8_t* row[8];
    for (int r = 0; r < 8; ++r)
      row[r] = r0 + r < rows ? static_cast<const uint8_t*>(w) + static_cast<std::size_t>(n0 + r0 + r) * row_bytes
                             : nullptr;
    for (int64_t blk = blk0; blk < blk1; ++blk) {
      uint8_t* dst = strip + (blk - blk0) * kGroupsPerBlock * wg_bytes;  // the block's first group
      __m256 a[8][2], c[8][2];
      for (int r = 0; r < 8; ++r) {
        if (row[r]) {
          block_scales<kType>(row[r] + blk * block_bytes<kType>(), a[r], c[r]);
        } else {
          a[r][0] = a[r][1] = c[r][0] = c[r][1] = _mm256_setzero_ps();
        }
      }
      if constexpr (kGroupsPerBlock == 1) {
        auto* scales = reinterpret_cast<float*>(dst + G * NR);
        for (int r = 0; r < 8; ++r) {
          scales[r0 + r] = _mm256_cvtss_f32(a[r][0]);
          scales[NR + r0 + r] = _mm256_cvtss_f32(c[r][0]);
        }
      } else {
        for (int h = 0; h < kGroupsPerBlock / 8; ++h) {
          __m256 av[8], cv[8];
          for (int r = 0; r < 8; ++r) av[r] = a[r][h], cv[r] = c[r][h];
          auto* scales = reinterpret_cast<float*>(dst + 8 * h * wg_bytes + G * NR);
          store_transposed(av, scales + r0, wg_bytes / 4);
          store_transposed(cv, scales + NR + r0, wg_bytes / 4);
        }
      }
#pragma GCC unroll 8
      for (int sub = 0; sub < U; ++sub) {
        __m256i v[8];
        for (int r = 0; r < 8; ++r)
          v[r] = row[r] ? levels<kType>(row[r] + blk * block_bytes<kType>(), sub) : _mm256_setzero_si256();
        transpose8(v);
        // v[j] holds elements 4j .. 4j + 3 of the unit for the 8 rows: chunk j % (G/4) of the unit's group j / (G/4).
        uint8_t* unit_dst = dst + sub * (32 / G) * wg_bytes;
        for (int j = 0; j < 8; ++j)
          _mm256_storeu_si256(
              reinterpret_cast<__m256i*>(unit_dst + (j / (G / 4)) * wg_bytes + (j % (G / 4)) * 4 * NR + 4 * r0), v[j]);
      }
    }
  }
}

// How many chunks (4 elements) of products an int16 lane may sum before it could overflow: a lane holds two
// products per chunk, each at most max_level · 127 in magnitude.
template <DType kType>
constexpr int int16_depth() {
  if constexpr (kType == DType::Q4_0 || kType == DType::Q4_1 || kType == DType::Q4_K) return 8;  // 16·15·127 = 30480
  else if constexpr (kType == DType::Q6_K) return 2;                                                // 4·63·127 = 32004
  else return 4;                                                                                     // 8·31·127 = 31496
}

// An empty asm that claims to change v: GCC then keeps each running sum one register updated in place. Without it
// GCC reassociates the chain of integer adds over a group into a tree that first computes all of the group's
// products, and spills them (q4_0 microkernel: 160 -> 240 GOP/s with it).
inline void keep(__m256i& v) { asm("" : "+x"(v)); }

template <DType kType>
void micro_t(int64_t ng, const uint8_t* xp, const uint8_t* wp, float* y, int64_t ldy, int mr, int nr, bool accumulate,
             const float* bias) {
  constexpr int G = kType == DType::Q6_K ? 16 : 32, MR = kQg2MR, NR = kQg2NR, NV = NR / 8, CH = G / 4;
  constexpr bool kSigned = kType == DType::Q8_0;
  constexpr int D = kSigned ? 1 : int16_depth<kType>();
  static_assert(CH % D == 0);
  const int64_t xg_bytes = qgemm_x_group_bytes(G, MR), wg_bytes = qgemm_w_group_bytes(G, NR);
  __m256i mask[NV];
  for (int v = 0; v < NV; ++v)
    mask[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8 * v), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  // vmaskmovps only for partial strips: its store form is microcoded on AMD (~7% of the time at M = 512 on Zen 4).
  const bool full = nr == NR;
  auto load = [&](const float* p, int v) { return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask[v]); };
  __m256 f[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v)
      f[i][v] = accumulate ? (i < mr ? load(y + i * ldy + 8 * v, v) : _mm256_setzero_ps())
                : bias     ? load(bias + 8 * v, v)
                           : _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t g = 0; g < ng; ++g) {
    const uint8_t* xg = xp + g * xg_bytes;
    const uint8_t* wg = wp + g * wg_bytes;
    __m256i s16[MR][NV], s32[MR][NV];  // the running int16 pair sums, the group's int32 sums
#pragma GCC unroll 8
    for (int ch = 0; ch < CH; ++ch) {
      __m256i w[NV], wa[NV];
      for (int v = 0; v < NV; ++v) {
        w[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + ch * 4 * NR + 32 * v));
        if constexpr (kSigned) wa[v] = _mm256_abs_epi8(w[v]);
      }
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        int xv;
        std::memcpy(&xv, xg + (ch * MR + i) * 4, 4);
        const __m256i xb = _mm256_set1_epi32(xv);
        for (int v = 0; v < NV; ++v) {
          if constexpr (kSigned) {
            // |w| · (x with w's sign): a pair sum reaches 2 · 128 · 127 = 32512, so each chunk widens at once.
            const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wa[v], _mm256_sign_epi8(xb, w[v])), ones);
            s32[i][v] = ch == 0 ? p : _mm256_add_epi32(s32[i][v], p);
            keep(s32[i][v]);
          } else {
            // D chunks of pair sums add up in int16 (int16_depth: no lane can overflow), then widen to int32.
            const __m256i p = _mm256_maddubs_epi16(w[v], xb);
            s16[i][v] = ch % D == 0 ? p : _mm256_add_epi16(s16[i][v], p);
            keep(s16[i][v]);
            if (ch % D == D - 1) {
              const __m256i p32 = _mm256_madd_epi16(s16[i][v], ones);
              s32[i][v] = ch == D - 1 ? p32 : _mm256_add_epi32(s32[i][v], p32);
            }
          }
        }
      }
    }
    // y += a · d_x · Σ u·x_q + c · s_x, once per group for 8 weight rows.
    const auto* ws = reinterpret_cast<const float*>(wg + G * NR);
    const auto* xs = reinterpret_cast<const float*>(xg + G * MR);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 dx = _mm256_broadcast_ss(xs + i);
      for (int v = 0; v < NV; ++v) {
        f[i][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32[i][v]), _mm256_mul_ps(_mm256_loadu_ps(ws + 8 * v), dx),
                                  f[i][v]);
        if constexpr (!kSigned)
          f[i][v] = _mm256_fmadd_ps(_mm256_loadu_ps(ws + NR + 8 * v), _mm256_broadcast_ss(xs + MR + i), f[i][v]);
      }
    }
  }
  for (int i = 0; i < mr; ++i)
    for (int v = 0; v < NV; ++v) {
      if (full) _mm256_storeu_ps(y + i * ldy + 8 * v, f[i][v]);
      else _mm256_maskstore_ps(y + i * ldy + 8 * v, mask[v], f[i][v]);
    }
}

}  // namespace

void qgemm_pack_w(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t g0, int64_t ng, uint8_t* strip) {
  switch (wt) {
    case DType::Q8_0: return pack_w_t<DType::Q8_0>(w, K, n0, rows, g0, ng, strip);
    case DType::Q4_0: return pack_w_t<DType::Q4_0>(w, K, n0, rows, g0, ng, strip);
    case DType::Q4_1: return pack_w_t<DType::Q4_1>(w, K, n0, rows, g0, ng, strip);
    case DType::Q5_0: return pack_w_t<DType::Q5_0>(w, K, n0, rows, g0, ng, strip);
    case DType::Q5_1: return pack_w_t<DType::Q5_1>(w, K, n0, rows, g0, ng, strip);
    case DType::Q4_K: return pack_w_t<DType::Q4_K>(w, K, n0, rows, g0, ng, strip);
    case DType::Q5_K: return pack_w_t<DType::Q5_K>(w, K, n0, rows, g0, ng, strip);
    case DType::Q6_K: return pack_w_t<DType::Q6_K>(w, K, n0, rows, g0, ng, strip);
    default: return;
  }
}

void qgemm_micro(DType wt, int64_t ng, const uint8_t* xp, const uint8_t* wp, float* y, int64_t ldy, int mr, int nr,
                 bool accumulate, const float* bias) {
  switch (wt) {
    case DType::Q8_0: return micro_t<DType::Q8_0>(ng, xp, wp, y, ldy, mr, nr, accumulate, bias);
    case DType::Q4_0: return micro_t<DType::Q4_0>(ng, xp, wp, y, ldy, mr, nr, accumulate, bias);
    case DType::Q4_1: return micro_t<DType::Q4_1>(ng, xp, wp, y, ldy, mr, nr, accumulate, bias);
    case DType::Q5_0: return micro_t<DType::Q5_0>(ng, xp, wp, y, ldy, mr, nr, accumulate, bias);
    case DType::Q5_1: return micro_t<DType::Q5_1>(ng, xp, wp, y, ldy, mr, nr, accumulate, bias);
    case DType::Q4_K: return micro_t<DType::Q4_K>(ng, xp, wp, y, ldy, mr, nr, accumulate, bias);
    case DType::Q5_K: return micro_t<DType::Q5_K>(ng, xp, wp, y, ldy, mr, nr, accumulate, bias);
    case DType::Q6_K: return micro_t<DType::Q6_K>(ng, xp, wp, y, ldy, mr, nr, accumulate, bias);
    default: return;
  }
}

}  // namespace ferry::ops::cpu::avx2
