// AMX kernels of ops::linear for bf16 weights (see linear_kernels.h, "AMX"): y = x · wᵀ computed as its transpose,
// yᵀ = w · xᵀ, so the weights are the A operand and need no repacking: a tile of A is 16 weight rows × 32 bf16,
// loaded straight from the row-major weight (or from a copy of one group of rows where M is large enough to reuse
// it). x is the B operand, rounded to bf16 and laid out once per call by pack_x: per block of 16 rows of x and
// chunk of 32 k, 16 tile rows of 16 pairs (x[m][k], x[m][k + 1]), the pair layout TDPBF16PS reads. Each C tile
// (16 outputs × 16 rows of x, f32) is transposed in zmm registers on the way out.
//
// Every output is one TDPBF16PS accumulator walked over the chunks of K in order from zero, whatever M, the kernel
// variant, and whether A came from the weight or from a copy: a row's result does not depend on the rows that share
// its call (batch invariance, linear_kernels.h).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "amx_tiles.h"
#include "linear_kernels.h"

namespace ferry::ops::cpu::amx {
namespace {

// Every tile 16 rows × 64 bytes (C: 16 × 16 f32; A: 16 × 32 bf16; B: 16 pairs-rows × 16 pairs).
void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  load_tile_config(cfg);
}

constexpr int64_t kChunk = 32;       // k per tile step (bf16)
constexpr int64_t kTileElems = 512;  // bf16 per A or B tile

// r[0..16) ← its transpose (16 × 16 32-bit elements). The zero-masking forms with every lane selected are the
// plain instructions; the plain intrinsics pass _mm512_undefined_*() through, which GCC 12 reports as used
// uninitialized (-Werror in CI).
inline void transpose16(__m512 r[16]) {
  constexpr __mmask16 k16 = 0xFFFF;
  constexpr __mmask8 k8 = 0xFF;
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_maskz_unpacklo_ps(k16, r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_maskz_unpackhi_ps(k16, r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    const __m512d t0 = _mm512_castps_pd(t[4 * i]), t1 = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * i + 2]), t3 = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(k8, t0, t2));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(k8, t0, t2));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(k8, t1, t3));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(k8, t1, t3));
  }
  // u[4i + j], 128-bit lane L: column 4L + j of rows 4i .. 4i + 3.
  for (int j = 0; j < 4; ++j) {
    const __m512 a = _mm512_maskz_shuffle_f32x4(k16, u[j], u[4 + j], 0x88);
    const __m512 b = _mm512_maskz_shuffle_f32x4(k16, u[j], u[4 + j], 0xdd);
    const __m512 c = _mm512_maskz_shuffle_f32x4(k16, u[8 + j], u[12 + j], 0x88);
    const __m512 d = _mm512_maskz_shuffle_f32x4(k16, u[8 + j], u[12 + j], 0xdd);
    r[j] = _mm512_maskz_shuffle_f32x4(k16, a, c, 0x88);
    r[j + 8] = _mm512_maskz_shuffle_f32x4(k16, a, c, 0xdd);
    r[j + 4] = _mm512_maskz_shuffle_f32x4(k16, b, d, 0x88);
    r[j + 12] = _mm512_maskz_shuffle_f32x4(k16, b, d, 0xdd);
  }
}

// A C tile saved by _tile_stored (16 outputs n × 16 rows m of x) → y[(m0 + m) · ldy + n0 + n] + bias[n0 + n] for
// m < mc, n < nc.
inline void store_transposed(const float* tile, float* y, int64_t ldy, int64_t m0, int mc, int64_t n0, int nc,
                             const float* bias) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_load_ps(tile + 16 * i);
  transpose16(r);
  const __mmask16 nmask = static_cast<__mmask16>((1u << nc) - 1);
  const __m512 b = bias ? _mm512_maskz_loadu_ps(nmask, bias + n0) : _mm512_setzero_ps();
  for (int m = 0; m < mc; ++m) _mm512_mask_storeu_ps(y + (m0 + m) * ldy + n0, nmask, _mm512_add_ps(r[m], b));
}

// Where the A tiles of a group of weight rows come from: chunks [0, kmain) at base[i] + c · step (bf16 elements),
// rows `stride` bytes apart; chunk kmain (when tail) from tail + i · kTileElems, rows 64 bytes apart.
struct ASource {
  const uint16_t* base[2];
  int64_t step;
  int64_t stride;
  int64_t kmain;
  const uint16_t* tail;  // nullptr: no tail chunk
};

// C tiles 0..3 = n-blocks {0, 1} × m-blocks {0, 1}; A in 4, 5; B in 6, 7.
void run_2x2(const ASource& a, const uint16_t* b0, const uint16_t* b1) {
  // One chunk: A tiles at a0, a1 (rows `stride` bytes apart), B tiles at b0, b1 + off.
  auto step = [&](const uint16_t* a0, const uint16_t* a1, int64_t stride, int64_t off) {
    _tile_loadd(4, a0, stride);
    _tile_loadd(6, b0 + off, 64);
    _tile_loadd(7, b1 + off, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_loadd(5, a1, stride);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  };
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t c = 0; c < a.kmain; ++c) step(a.base[0] + c * a.step, a.base[1] + c * a.step, a.stride, c * kTileElems);
  if (a.tail) step(a.tail, a.tail + kTileElems, 64, a.kmain * kTileElems);
}

// C tiles 0, 1 = n-blocks 0, 1 × one m-block; A in 4, 5; B in 7. (One block of x: decode and small batches, where
// the weights stream from memory. Measured on Sapphire Rapids, 2 threads, 2048 × 2048 to 5632 × 2048: with 32 rows
// per step tile loads stream the weights at 0.88-0.95 of the AVX-512 GEMV's rate, with 64 rows 0.75-0.86, with 16
// about as with 32; software prefetching made it slower.)
void run_2x1(const ASource& a, const uint16_t* b0) {
  auto step = [&](const uint16_t* a0, const uint16_t* a1, int64_t stride, int64_t off) {
    _tile_loadd(7, b0 + off, 64);
    _tile_loadd(4, a0, stride);
    _tile_loadd(5, a1, stride);
    _tile_dpbf16ps(0, 4, 7);
    _tile_dpbf16ps(1, 5, 7);
  };
  _tile_zero(0);
  _tile_zero(1);
  for (int64_t c = 0; c < a.kmain; ++c) step(a.base[0] + c * a.step, a.base[1] + c * a.step, a.stride, c * kTileElems);
  if (a.tail) step(a.tail, a.tail + kTileElems, 64, a.kmain * kTileElems);
}

// Copies weight rows [n, n + rows) (rows <= 16 · blocks) × chunks [c0, c1) of K into dst in tile order — block i,
// chunk c at dst + (i · (c1 - c0) + c - c0) · kTileElems — with zeros past row n + rows and past column K.
void pack_rows(const uint16_t* w, int64_t K, int64_t n, int64_t rows, int blocks, int64_t c0, int64_t c1,
               uint16_t* dst) {
  const int64_t chunks = c1 - c0;
  for (int i = 0; i < blocks; ++i)
    for (int r = 0; r < 16; ++r) {
      const int64_t row = 16 * i + r;
      for (int64_t c = c0; c < c1; ++c) {
        uint16_t* out = dst + (i * chunks + c - c0) * kTileElems + r * kChunk;
        const int64_t len = row < rows ? std::clamp<int64_t>(K - c * kChunk, 0, kChunk) : 0;
        const __mmask32 mask = static_cast<__mmask32>(len >= 32 ? ~0u : (1u << len) - 1);
        const uint16_t* src = w + (n + std::min(row, rows - 1)) * K + c * kChunk;
        _mm512_storeu_si512(out, _mm512_maskz_loadu_epi16(mask, src));
      }
    }
}

// The C tiles of a group (tile i · mblocks + j: weight rows n + 16 i, rows of x (b + j) · 16) into y, skipping
// blocks past n_end or M.
void store_group(const float (*tiles)[256], int nblocks, int mblocks, float* y, int64_t ldy, int64_t M, int64_t b,
                 int64_t n, int64_t n_end, const float* bias) {
  for (int i = 0; i < nblocks; ++i) {
    const int64_t n0 = n + 16 * i;
    if (n0 >= n_end) break;
    const int nc = static_cast<int>(std::min<int64_t>(16, n_end - n0));
    for (int j = 0; j < mblocks; ++j) {
      const int64_t m0 = (b + j) * 16;
      if (m0 >= M) break;
      store_transposed(tiles[i * mblocks + j], y, ldy, m0, static_cast<int>(std::min<int64_t>(16, M - m0)), n0, nc,
                       bias);
    }
  }
}

}  // namespace

void pack_x(const uint16_t* xb, int64_t M, int64_t K, int64_t b0, int64_t b1, uint16_t* dst) {
  const int64_t chunks = (K + kChunk - 1) / kChunk;
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t c = 0; c < chunks; ++c) {
      __m512 r[16];
      const int64_t len = std::min<int64_t>(kChunk, K - c * kChunk);
      const __mmask32 mask = static_cast<__mmask32>(len >= 32 ? ~0u : (1u << len) - 1);
      for (int m = 0; m < 16; ++m) {
        const int64_t row = b * 16 + m;
        r[m] = row < M ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(mask, xb + row * K + c * kChunk))
                       : _mm512_setzero_ps();
      }
      transpose16(r);  // row p: the pair p (k = 2p, 2p + 1) of the 16 rows of x
      uint16_t* out = dst + (b * chunks + c) * kTileElems;
      for (int p = 0; p < 16; ++p) _mm512_storeu_ps(reinterpret_cast<float*>(out) + 16 * p, r[p]);
    }
}

void linear_bf16(const void* weight, int64_t K, const uint16_t* xp, int64_t M, const float* bias, float* y, int64_t ldy,
                 int64_t n0, int64_t n1) {
  if (n1 <= n0 || M <= 0) return;
  const auto* w = static_cast<const uint16_t*>(weight);
  const int64_t chunks = (K + kChunk - 1) / kChunk, full = K / kChunk, mblocks = (M + 15) / 16;
  const int64_t xblock = chunks * kTileElems;  // bf16 per 16-row block of packed x
  configure_tiles();
  alignas(64) float tiles[4][256];
  thread_local std::vector<uint16_t> panel;
  if (mblocks == 1) {
    // Few rows of x: 32 weight rows per step, loaded in place; a partial group or the K tail from a padded copy.
    alignas(64) uint16_t tail[2 * kTileElems];
    for (int64_t n = n0; n < n1; n += 32) {
      const int64_t rows = std::min<int64_t>(32, n1 - n);
      ASource a{};
      if (rows == 32) {
        a = ASource{{w + n * K, w + (n + 16) * K}, kChunk, K * 2, full, nullptr};
        if (full < chunks) pack_rows(w, K, n, rows, 2, full, chunks, tail), a.tail = tail;
      } else {
        panel.resize(static_cast<std::size_t>(2 * xblock));
        pack_rows(w, K, n, rows, 2, 0, chunks, panel.data());
        a = ASource{{panel.data(), panel.data() + xblock}, kTileElems, 64, chunks, nullptr};
      }
      run_2x1(a, xp);
      _tile_stored(0, tiles[0], 64);
      _tile_stored(1, tiles[1], 64);
      store_group(tiles, 2, 1, y, ldy, M, 0, n, n + rows, bias);
    }
  } else {
    // Many rows: 32 weight rows at a time copied into tile order (contiguous tiles: no cache-set conflicts between
    // the 16 rows of a tile when the group is reused for every block of x), then every pair of x blocks.
    panel.resize(static_cast<std::size_t>(2 * xblock));
    const int64_t pairs = (mblocks + 1) / 2, row_bytes = K * 2;
    for (int64_t n = n0; n < n1; n += 32) {
      const int64_t rows = std::min<int64_t>(32, n1 - n);
      pack_rows(w, K, n, rows, 2, 0, chunks, panel.data());
      const ASource a{{panel.data(), panel.data() + xblock}, kTileElems, 64, chunks, nullptr};
      // The next group's rows, into L2 a slice per pair of x blocks, so that its copy does not wait on memory.
      const int64_t next_rows = std::clamp<int64_t>(n1 - n - 32, 0, 32);
      const char* next = next_rows > 0 ? reinterpret_cast<const char*>(w + (n + 32) * K) : nullptr;
      const int64_t next_lines = (next_rows * row_bytes + 63) / 64, per_pair = (next_lines + pairs - 1) / pairs;
      for (int64_t b = 0; b < mblocks; b += 2) {
        for (int64_t l = b / 2 * per_pair, end = std::min(next_lines, l + per_pair); l < end; ++l)
          _mm_prefetch(next + l * 64, _MM_HINT_T1);
        const uint16_t* x0 = xp + b * xblock;
        // An odd last block pairs with itself: the duplicate's results are computed and not stored.
        const uint16_t* x1 = b + 1 < mblocks ? x0 + xblock : x0;
        run_2x2(a, x0, x1);
        _tile_stored(0, tiles[0], 64);
        _tile_stored(1, tiles[1], 64);
        _tile_stored(2, tiles[2], 64);
        _tile_stored(3, tiles[3], 64);
        store_group(tiles, 2, 2, y, ldy, M, b, n, n + rows, bias);
      }
    }
  }
  _tile_release();
}

}  // namespace ferry::ops::cpu::amx
