// The quantized GEMM's AMX int8 microkernel (see quant_kernels.h, "AMX"): the activations are the A operand (signed
// int8 levels, 16 rows × one group of G levels, row by row: quant_gemm.cc packs them so), the weights the B operand,
// the AVX-512 VNNI strip layout ([G/4][kQgNR][4]: a strip's two halves of 16 rows are two B tiles, rows 128 bytes
// apart) with signed levels for the symmetric types (TDPBSSD, no offset term) and unsigned ones otherwise (TDPBSUD).
// Each group's integer sums come out of a tile as 16 × 16 int32 and are scaled as the AVX-512 microkernel scales
// them: y[m, n] += a_n · d_x,m · Σ q·x_q (+ c_n · s_x,m).
//
// Where the time goes (Sapphire Rapids VM, 2 threads, q8_0, 512 × 2048 × 2048; bench_quant_gemm with parts of this
// kernel compiled out): the whole GEMM 6.3 ms; without the tile products and stores 4.5, without the scaling 5.1,
// without both 2.8 (the driver: quantizing and packing x, unpacking the weights, reading and writing y per K block,
// shared with the AVX-512 GEMM, 7.2-7.5 ms in all). The tile work and the AVX-512 scaling do not overlap on this
// CPU: a standalone loop of tile products plus 64 FMAs takes the sum of their times. Per 16 × 16 × 32 tile product
// the scaling is 3-4 vector instructions per row, inherent to formats with a scale per 32 weights and 32
// activations; hence ~1.1x the AVX-512 GEMM rather than the tiles' peak.
#include "amx_tiles.h"
#include "quant_kernels.h"

namespace ferry::ops::cpu::amx {
namespace {

// Tiles 0, 1: C (16 activation rows × 16 weight rows, int32), for even and odd groups; 2, 4: A (16 activation rows ×
// G levels); 3, 5: B (G/4 rows of 16 weight rows × 4 levels).
void configure_tiles(int G) {
  TileConfig cfg;
  for (int t : {0, 1}) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  for (int t : {2, 4}) cfg.colsb[t] = static_cast<uint16_t>(G), cfg.rows[t] = 16;
  for (int t : {3, 5}) cfg.colsb[t] = 64, cfg.rows[t] = static_cast<uint8_t>(G / 4);
  load_tile_config(cfg);
}

// Group g's sums into tile 0 (through A tile 2, B tile 3) or, odd, tile 1 (A 4, B 5). The tile numbers must be
// literals: GCC's AMX intrinsics paste them into the instruction text.
template <int G, bool kSigned>
inline void issue(const uint8_t* xg, const uint8_t* wg, bool odd) {
  if (!odd) {
    _tile_zero(0);
    _tile_loadd(2, xg, G);
    _tile_loadd(3, wg, 4 * kQgNR);
    if constexpr (kSigned) _tile_dpbssd(0, 2, 3);
    else _tile_dpbsud(0, 2, 3);
  } else {
    _tile_zero(1);
    _tile_loadd(4, xg, G);
    _tile_loadd(5, wg, 4 * kQgNR);
    if constexpr (kSigned) _tile_dpbssd(1, 4, 5);
    else _tile_dpbsud(1, 4, 5);
  }
}

// The 16 rows of an A tile, for code spelled out per row: the accumulators are 16 named variables, since an array
// of them stays in memory (the tile stores' memory clobber then makes every update a load and a store).
#define FERRY_AMX_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)

// Output columns [16 h, 16 h + 16) of the tile (mask `nmask`): the groups' integer sums in tiles 0 and 1 by turns,
// each stored and scaled while the tiles compute the next group's, into 16 accumulators kept in registers.
template <int G, bool kSigned>
void half_t(int h, int64_t ng, const uint8_t* xp, const uint8_t* wp, float* y, int64_t ldy, int mr, __mmask16 nmask,
            bool accumulate, const float* bias) {
  constexpr int MR = kQgAmxMR;
  static_assert(MR == 16, "FERRY_AMX_ROWS spells out 16 rows");
  const int64_t xg_bytes = qgemm_x_group_bytes(G, MR), wg_bytes = qgemm_w_group_bytes(G);
  alignas(64) int32_t sums[2][16][16];
#define FERRY_INIT(i)                                                                                            \
  __m512 f##i = accumulate ? (i < mr ? _mm512_maskz_loadu_ps(nmask, y + i * ldy + 16 * h) : _mm512_setzero_ps()) \
                : bias     ? _mm512_maskz_loadu_ps(nmask, bias + 16 * h)                                         \
                           : _mm512_setzero_ps();
  FERRY_AMX_ROWS(FERRY_INIT)
#undef FERRY_INIT
  // Group g: its tile product issued in iteration g - 1, its sums stored in iteration g and scaled in g + 1, so
  // that the vector loads never wait on the tile store just made.
  auto scale = [&](int64_t g) __attribute__((always_inline)) {
    const int32_t(*s)[16] = sums[g % 2];
    const auto* ws = reinterpret_cast<const float*>(wp + g * wg_bytes + G * kQgNR);
    const auto* xs = reinterpret_cast<const float*>(xp + g * xg_bytes + G * MR);
    const __m512 a = _mm512_loadu_ps(ws + 16 * h), c = _mm512_loadu_ps(ws + kQgNR + 16 * h);
#define FERRY_SCALE(i)                                                              \
  f##i = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_load_si512(s[i])), \
                         _mm512_mul_ps(a, _mm512_set1_ps(xs[i])), f##i);            \
  if constexpr (!kSigned) f##i = _mm512_fmadd_ps(c, _mm512_set1_ps(xs[MR + i]), f##i);
    FERRY_AMX_ROWS(FERRY_SCALE)
#undef FERRY_SCALE
  };
  issue<G, kSigned>(xp, wp + 64 * h, false);
  for (int64_t g = 0; g < ng; ++g) {
    const bool odd = g % 2 == 1;
    if (g + 1 < ng) issue<G, kSigned>(xp + (g + 1) * xg_bytes, wp + (g + 1) * wg_bytes + 64 * h, !odd);
    if (odd) _tile_stored(1, sums[1], 64);
    else _tile_stored(0, sums[0], 64);
    if (g > 0) scale(g - 1);
  }
  scale(ng - 1);
#define FERRY_STORE(i) \
  if (i < mr) _mm512_mask_storeu_ps(y + i * ldy + 16 * h, nmask, f##i);
  FERRY_AMX_ROWS(FERRY_STORE)
#undef FERRY_STORE
}

#undef FERRY_AMX_ROWS

template <int G, bool kSigned>
void micro_t(int64_t ng, const uint8_t* xp, const uint8_t* wp, float* y, int64_t ldy, int mr, int nr, bool accumulate,
             const float* bias) {
  half_t<G, kSigned>(0, ng, xp, wp, y, ldy, mr, static_cast<__mmask16>(nr >= 16 ? 0xFFFF : (1u << nr) - 1), accumulate,
                     bias);
  if (nr > 16)
    half_t<G, kSigned>(1, ng, xp, wp, y, ldy, mr, static_cast<__mmask16>(nr >= 32 ? 0xFFFF : (1u << (nr - 16)) - 1),
                       accumulate, bias);
}

}  // namespace

void qgemm_begin(int G) { configure_tiles(G); }
void qgemm_end() { _tile_release(); }

void qgemm_micro(int G, bool signed_w, int64_t ng, const uint8_t* xp, const uint8_t* wp, float* y, int64_t ldy, int mr,
                 int nr, bool accumulate, const float* bias) {
  // q6_k, the one type with 16-element groups, is symmetric: its strips are always signed.
  if (G == 16) return micro_t<16, true>(ng, xp, wp, y, ldy, mr, nr, accumulate, bias);
  if (signed_w) return micro_t<32, true>(ng, xp, wp, y, ldy, mr, nr, accumulate, bias);
  micro_t<32, false>(ng, xp, wp, y, ldy, mr, nr, accumulate, bias);
}

}  // namespace ferry::ops::cpu::amx
