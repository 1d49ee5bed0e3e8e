// AVX-512 BF16 small-batch linear for bf16 weights (see linear_kernels.h; the driver, small_batch() in
// small_batch.cc, rounds x to bf16 once per call with round_to_bf16, as the bf16 GEMV does, and lays it out with
// pack_small_batch_x): M activation rows (every M >= 2 in ops::linear: batched decode and prefill, see
// kSmallBatchMaxRowsBf16) times bf16 weight rows.
//
// The structure of small_batch_avx512.cc (R = 4 weight rows × a tile of up to 6 activation rows, 24 zmm
// accumulators, the next block's rows prefetched across the tiles) on bf16 pairs: per 32-element step each weight
// row is one 64-byte load and each x row one 64-byte load, and vdpbf16ps multiplies both bf16 of each 32-bit lane
// and adds the two products to that lane's f32 accumulator — 24 vdpbf16ps per 32 elements, where the f32 kernel
// needs 48 FMAs and 8 conversions. K tails (K mod 32, odd K included) go in one step whose lanes past K are zero in
// both operands (masked weights, zero-padded x).
// x comes packed: a tile's rows interleaved step by step, so the tile reads x as one sequential stream through one
// pointer with constant offsets (with a pointer per row the 6 x pointers, 4 weight pointers and the loop state
// outgrew the 16 general registers and were reloaded from the stack every step). For many rows (prefill) the tiles
// run in groups whose x fits in L2 (kXGroupBytes), each group against every weight row of the thread: weights are
// read once per group, x comes from L2 instead of L3. Both together, at M = 512 on TinyLlama's shapes (bench_ops
// PrefillSmallBatchVsGemm, 2 threads): 380-400 GFLOP/s where rows as they were gave 230-350 and the bf16 GEMM gives
// 350-395, so prefill needs no GEMM (which would not be batch-invariant).
// Every output is the dot product of bf16_dot_avx512bf16.h, the GEMV's: an output does not depend on M, on its row's
// place in a tile or on the other rows, and equals the GEMV of its row alone bit for bit (linear_kernels.h: batch
// invariance). bench_ops SmallBatch/bf16 (4096 × 4096, medians of 3, loaded dev VM) against the f32-FMA kernel on f32
// x it replaces: M = 4 1.87 vs 1.99 ms (memory-bound), 8 2.35 vs 3.05, 16 3.0 vs 5.9, 32 6.4 vs 12.2, 64 11.3 vs 23.1.
// N tails: a partial block repeats its last row and drops those outputs.
// Everything here has internal linkage except the kernel, and no standard-library template is instantiated, so the
// linker cannot pick code of this file (built with -mavx512bf16) for a translation unit of a lower ISA.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() values, which -Wuninitialized reports in every caller
// (a false positive): silenced for this file, before the header is read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "bf16_dot_avx512bf16.h"
#include "linear_kernels.h"

#define FERRY_UNROLL _Pragma("GCC unroll 16")

namespace ferry::ops::cpu::avx512bf16 {
namespace {

constexpr int R = 4;
// x bytes per group of tiles (a quarter of Zen 4's 1 MiB L2; bench_ops PrefillSmallBatchVsGemm: 256 KiB and 384 KiB
// ran 1.1-1.2x faster than no grouping at K = 2048, 768 KiB as slow as none).
constexpr int64_t kXGroupBytes = int64_t{256} << 10;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// out[r][m] = the accumulator of dot(row r, x_m) for R weight rows and the MT activation rows of a packed tile (xt:
// step s of row m at xt + (s · MT + m) · 32, zero past K; see pack_small_batch_x). While it runs, a tile pulls
// `pf_bytes` bytes of each of the R rows at pf[r] towards the cache, spread evenly over its K steps (see rows_block()).
template <int MT>
void tile(const uint16_t* const* rows, int64_t K, const uint16_t* xt, __m512 (*out)[kSmallBatchRowTile],
          const char* const* pf, int64_t pf_bytes) {
  const int64_t steps = K / 32, lines = (pf_bytes + 63) / 64;
  int64_t pf_line = 0, credit = 0;
  __m512 acc[R][MT];
  FERRY_UNROLL
  for (int r = 0; r < R; ++r)
    FERRY_UNROLL
    for (int m = 0; m < MT; ++m) acc[r][m] = _mm512_setzero_ps();
  int64_t k = 0;
  const uint16_t* xs = xt;
  for (; k + 32 <= K; k += 32, xs += MT * 32) {
    for (credit += lines; credit >= steps && pf_line < lines; credit -= steps, ++pf_line)
      FERRY_UNROLL
      for (int r = 0; r < R; ++r) _mm_prefetch(pf[r] + 64 * pf_line, _MM_HINT_T1);
    __m512bh wv[R];
    FERRY_UNROLL
    for (int r = 0; r < R; ++r) wv[r] = load_bf16x32(rows[r] + k);
    FERRY_UNROLL
    for (int m = 0; m < MT; ++m) {
      const __m512bh xv = load_bf16x32(xs + m * 32);
      FERRY_UNROLL
      for (int r = 0; r < R; ++r) acc[r][m] = dot_step(acc[r][m], wv[r], xv);
    }
  }
  if (k < K) {
    // The weights' tail is masked; x's is zero in the packing, as the GEMV's masked load makes it.
    const __mmask32 mask = tail_mask(K - k);
    __m512bh wv[R];
    FERRY_UNROLL
    for (int r = 0; r < R; ++r) wv[r] = load_tail(rows[r] + k, mask);
    FERRY_UNROLL
    for (int m = 0; m < MT; ++m) {
      const __m512bh xv = load_bf16x32(xs + m * 32);
      FERRY_UNROLL
      for (int r = 0; r < R; ++r) acc[r][m] = dot_step(acc[r][m], wv[r], xv);
    }
  }
  FERRY_UNROLL
  for (int r = 0; r < R; ++r)
    FERRY_UNROLL
    for (int m = 0; m < MT; ++m) out[r][m] = acc[r][m];
}

// Weight rows [n0, n1) against tiles [t0, t1) of the packed x (`tiles` in all, over M rows).
void rows_block(const void* w, int64_t K, const uint16_t* x, int64_t M, int64_t tiles, int64_t t0, int64_t t1,
                const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1) {
  const auto* base = static_cast<const uint16_t*>(w);
  const std::size_t row_elems = static_cast<std::size_t>(K), row_bytes = 2 * row_elems;
  const int64_t Kp = small_batch_padded_k(K), nt = t1 - t0;
  for (int64_t n = n0; n < n1; n += R) {
    const int valid = static_cast<int>(min64(R, n1 - n));
    const uint16_t* rows[R];
    for (int r = 0; r < R; ++r) rows[r] = base + static_cast<std::size_t>(n + (r < valid ? r : valid - 1)) * row_elems;
    // The next block's rows, fetched while this block computes (its tiles share them out): the first tile of the
    // next block then finds its weights in L2 instead of waiting on memory between bursts of vdpbf16ps.
    const int64_t next_valid = min64(R, n1 - n - R);
    const char* next[R];
    for (int r = 0; r < R; ++r) {
      const int64_t row = n + R + (r < next_valid ? r : next_valid - 1);
      next[r] = reinterpret_cast<const char*>(base + static_cast<std::size_t>(row) * row_elems);
    }
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t m0 = small_batch_tile_start(M, tiles, t), mt = small_batch_tile_start(M, tiles, t + 1) - m0;
      const uint16_t* xt = x + m0 * Kp;
      const int64_t i = t - t0;
      const int64_t pf0 = next_valid > 0 ? static_cast<int64_t>(row_bytes) * i / nt : 0;
      const int64_t pf_bytes = next_valid > 0 ? static_cast<int64_t>(row_bytes) * (i + 1) / nt - pf0 : 0;
      const char* pf[R];
      for (int r = 0; r < R; ++r) pf[r] = next[r] + pf0;
      __m512 out[R][kSmallBatchRowTile];
      switch (mt) {
        case 1: tile<1>(rows, K, xt, out, pf, pf_bytes); break;
        case 2: tile<2>(rows, K, xt, out, pf, pf_bytes); break;
        case 3: tile<3>(rows, K, xt, out, pf, pf_bytes); break;
        case 4: tile<4>(rows, K, xt, out, pf, pf_bytes); break;
        case 5: tile<5>(rows, K, xt, out, pf, pf_bytes); break;
        default: tile<6>(rows, K, xt, out, pf, pf_bytes); break;
      }
      for (int64_t m = 0; m < mt; ++m)
        for (int r = 0; r < valid; ++r) y[(m0 + m) * ldy + n + r] = dot_result(out[r][m], bias, n + r);
    }
  }
}

}  // namespace

void small_batch(const void* w, int64_t K, const uint16_t* x, int64_t M, const float* bias, float* y, int64_t ldy,
                 int64_t n0, int64_t n1) {
  // Groups of whole tiles whose x (at most kXGroupBytes) stays in L2 while this thread's weight rows stream past.
  const int64_t tiles = small_batch_tiles(M), tile_bytes = 2 * kSmallBatchRowTile * (small_batch_padded_k(K) + 1);
  const int64_t per_group = kXGroupBytes / tile_bytes > 0 ? kXGroupBytes / tile_bytes : 1;
  const int64_t groups = (tiles + per_group - 1) / per_group;
  for (int64_t g = 0; g < groups; ++g)
    rows_block(w, K, x, M, tiles, tiles * g / groups, tiles * (g + 1) / groups, bias, y, ldy, n0, n1);
}

}  // namespace ferry::ops::cpu::avx512bf16
