// Kernels behind ops::linear and ops::matmul, one set per ISA (scalar in gemv.cc / gemm.cc / small_batch.cc, AVX2 in
// gemv_avx2.cc / gemm_avx2.cc / small_batch_avx2.cc, AVX-512 in small_batch_avx512.cc, AVX-512 BF16 in
// gemv_avx512bf16.cc / small_batch_avx512bf16.cc with x from bf16_activations.cc and round_bf16_avx512bf16.cc; an
// ISA without its own version of a kernel runs the next lower one), chosen once per op call by linear_kernels() (and
// use_bf16_kernels()).
//
// Legend: M = rows of the activations (tokens), N = output features, K = input features (the reduction).
// GEMV (M == 1): each weight row is read once, converted in registers and dotted with x; a thread walks its rows
// eight at a time so eight row streams are in flight (one stream per thread does not saturate memory).
// Small batch (2 <= M <= small_batch_max_rows, f32 / f16 / bf16 weights; batched decode): dot-product form. A thread
// takes blocks of R weight rows (AVX-512: 4, AVX2: 2); for each tile of up to 6 activation rows it walks K, converts
// the R weight vectors of a step in registers and FMAs each with the tile's x vectors into R × 6 accumulators. Each
// weight row is read from memory once per call; the block stays in L1/L2 across the M tiles. Where the GEMV is
// memory-bound this is too (small M), and at larger M it runs at the FMA rate with no packing pass.
// GEMM (M > 1 otherwise): the blocked loop of gemm.cc packs x into MR-row panels and, per thread, converts a weight
// block into NR-column f32 panels, then runs the MR × NR register-blocked microkernel over them.
// bf16 weights on a CPU with AVX512_BF16 (ISA AVX512; use_bf16_kernels): every path rounds x to bf16 (nearest-even,
// as llama.cpp and bf16 matmuls in PyTorch do) with the one conversion of avx512bf16::round_to_bf16, and
// multiplies bf16 pairs with vdpbf16ps into f32 accumulators (products of two bf16 are exact in f32).
// FERRY_ISA=avx2 keeps the f32 paths (x not rounded).
//   GEMV (gemv_avx512bf16.cc): a weight row's 32 bf16 are one zmm, dotted with 32 bf16 of x by one vdpbf16ps.
//   Small batch (small_batch_avx512bf16.cc): the AVX-512 kernel's 4 × 6 tile on bf16 pairs, x packed per tile.
//   No GEMM: the small-batch kernel takes every M >= 2 and runs prefill as fast as a bf16 GEMM did (below).
// Batch invariance: rounding to bf16 turns a difference of one f32 ulp ahead of a linear layer into one of a bf16 ulp
// (2⁻⁸) whenever it carries a value across a rounding boundary, so paths that differ only in the order of their f32
// sums — harmless for f32 / f16 weights — flip near-ties of a model's tokens: with the GEMV, the small-batch kernel
// and the GEMM each rounding x, a sequence served alone and in a batch of 32 differed in 3 of 32 streams, every run
// (ServeOpenAi.ThirtyTwoConcurrentStreamsEachEqualTheirSoloResult). So the GEMV and the small-batch kernel compute
// every output with the same instructions in the same order (bf16_dot_avx512bf16.h), and ops::linear takes the
// small-batch kernel for every M >= 2 (kSmallBatchMaxRowsBf16): a row's result is bit for bit the same whatever
// other rows share the call, and continuous batching gives each sequence its solo tokens. Prefill loses nothing by it
// (kSmallBatchMaxRowsBf16 gives the measurements against the bf16 GEMM this replaced, 12 × 32 vdpbf16ps tiles on
// packed pairs, removed since no path took it; see git history).
// AMX (ISA AMX, bf16 weights; use_amx): x rounded to bf16 by the same round_to_bf16, then Intel AMX tiles for every
// M (amx_linear.cc drives, tile_gemm_amx.cc computes). The weights are the A operand of TDPBF16PS (yᵀ = w · xᵀ): a
// tile is 16 weight rows × 32 bf16, loaded in place from the row-major weight when x has one block of 16 rows (four
// row blocks per step: decode and small batches stay memory-bound, as the GEMV), else from a copy of 32 rows in tile
// order, made once per group and reused for every block of x. x is the B operand, laid out once per call in the
// pair rows TDPBF16PS reads (amx::pack_x). Nothing is repacked at load: resident, mmap'd and staged weights all run
// as they lie, so disk offload keeps its bound. Each output is one tile accumulator over the chunks of K in order,
// whatever M or kernel variant, so rows are batch invariant here too (the AMX sums differ from the AVX-512 BF16
// ones in order only: within f32 summation noise, tests/ops/amx_linear_test.cc).
// Error: that of rounding x to bf16 (2⁻⁹ relative per element): at 512 × 2048 × 2048 against f64, rms error 1.5e-3
// of rms(y) and at most 2.7e-4 of Σ|x·w| (f32 path: 2.9e-7, 7e-8).
#pragma once

#include <cstdint>
#include <limits>

#include "ferry/core/cpu_features.h"
#include "ferry/core/dtype.h"

namespace ferry::ops::cpu {

inline constexpr int kMR = 6;    // microkernel rows (tokens)
inline constexpr int kNR = 16;   // microkernel columns (output features): two 8-lane vectors
inline constexpr int64_t kKC = 256;  // reduction block: an NR × KC f32 weight panel is 16 KiB (L1)
inline constexpr int64_t kNC = 64;   // output features per task: a KC × NC packed weight block is 64 KiB (L2)
inline constexpr int64_t kMC = 288;  // activation rows per pass: each weight block is converted once per pass


/// Rows of activations up to which ops::linear takes the small-batch kernel rather than the GEMM, the measured
/// crossovers (docs/benchmarks.md): with AVX-512, kSmallBatchMaxRows for f16 / bf16 weights and
/// kSmallBatchMaxRowsF32 for f32 (an R-row block of f32 weights, 4 × 16 KiB at K = 4096, no longer stays in L1 beside
/// the x tile, so every step reads both from L2 while the GEMM's packed panels stay in L1); with AVX2 (and scalar)
/// kSmallBatchMaxRowsAvx2 for all three (R = 2 rows per block read twice the x bytes per FMA, which L2 cannot feed
/// once M · K · 4 bytes outgrow it).
inline constexpr int64_t kSmallBatchMaxRows = 64;
inline constexpr int64_t kSmallBatchMaxRowsF32 = 32;
inline constexpr int64_t kSmallBatchMaxRowsAvx2 = 16;
/// bf16 weights on AVX-512 BF16 CPUs (use_bf16_kernels): every row count, for batch invariance (see the top of this
/// file). With x packed per tile and the tiles grouped to keep x in L2 (small_batch_avx512bf16.cc) the kernel was as
/// fast as the bf16 GEMM (vdpbf16ps on packed pairs) at prefill too: bench_ops PrefillSmallBatchVsGemm (M = 512 on
/// TinyLlama's shapes, 2 threads) 380-400 GFLOP/s against that GEMM's 350-395 (before the packing: 0.70-0.84x of
/// it at K = 2048). So that GEMM is gone, and rows past any limit here would go to the f32-panel GEMM (~200 GFLOP/s).
inline constexpr int64_t kSmallBatchMaxRowsBf16 = std::numeric_limits<int64_t>::max();
/// Activation rows per register tile of the small-batch kernels (AVX-512 and AVX2).
inline constexpr int kSmallBatchRowTile = 6;
/// The tiles of M activation rows in the AVX-512 BF16 small-batch kernel: ⌈M / kSmallBatchRowTile⌉ of them, balanced
/// (M = 7 runs as 4 + 3, not 6 + 1); tile t holds rows [small_batch_tile_start(M, tiles, t), ..(t + 1)).
inline int64_t small_batch_tiles(int64_t M) { return (M + kSmallBatchRowTile - 1) / kSmallBatchRowTile; }
inline int64_t small_batch_tile_start(int64_t M, int64_t tiles, int64_t t) { return M * t / tiles; }
/// K rounded up to whole 32-element steps: the row length of the packed x of that kernel.
inline int64_t small_batch_padded_k(int64_t K) { return (K + 31) / 32 * 32; }

struct LinearKernels {
  /// y[n] = dot(w[n, :K], x) (+ bias[n] when bias != nullptr) for n in [n0, n1). w: rows of dtype wt.
  void (*gemv)(DType wt, const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n0,
               int64_t n1);
  /// c[i, j] (i < mr, j < nr, row stride ldc) = (accumulate ? c[i, j] : bias ? bias[j] : 0) + Σ_k a[k, i]·b[k, j]
  /// with a: kc × kMR packed (row k holds MR activations), b: kc × kNR packed.
  void (*micro)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr, bool accumulate,
                const float* bias);
  /// Packs weight rows [n0, n0 + rows) (rows ≤ kNR) × columns [k0, k0 + kc) of w ([N, K], dtype wt) as f32 into
  /// panel[k * kNR + j]; columns j ≥ rows are zero.
  void (*pack_panel)(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t k0, int64_t kc, float* panel);
  /// y[m · ldy + n] = dot(w[n, :K], x_m) (+ bias[n]) for n in [n0, n1), m < M; x_m = x + m · K. w: rows of dtype wt
  /// (f32, f16 or bf16). For bf16 weights x must be arranged as bf16_x_block says.
  void (*small_batch)(DType wt, const void* w, int64_t K, const float* x, int64_t M, const float* bias, float* y,
                      int64_t ldy, int64_t n0, int64_t n1);
  /// 0, or the block B (16 or 32) in which the small-batch kernel wants x for bf16 weights: within each whole block
  /// of B elements of a row, the even-indexed elements first, then the odd ones ([x0 x2 .. x_{B-2} | x1 x3 ..]); the
  /// elements past the last whole block as they are. (It reads B bf16 as B/2 32-bit words, whose low halves are the
  /// even elements and high halves the odd ones: one shift or one mask each gives f32, with no shuffles.)
  int bf16_x_block;
};

const LinearKernels& linear_kernels(Isa isa);

namespace scalar {
void gemv(DType wt, const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n0, int64_t n1);
void micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr, bool accumulate,
           const float* bias);
void pack_panel(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t k0, int64_t kc, float* panel);
void small_batch(DType wt, const void* w, int64_t K, const float* x, int64_t M, const float* bias, float* y,
                 int64_t ldy, int64_t n0, int64_t n1);
}  // namespace scalar
namespace avx2 {
void gemv(DType wt, const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n0, int64_t n1);
void micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr, bool accumulate,
           const float* bias);
void pack_panel(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t k0, int64_t kc, float* panel);
void small_batch(DType wt, const void* w, int64_t K, const float* x, int64_t M, const float* bias, float* y,
                 int64_t ldy, int64_t n0, int64_t n1);
inline constexpr int kSmallBatchX = 16;  // bf16_x_block of the AVX2 small-batch kernel
}  // namespace avx2
namespace avx512 {
void small_batch(DType wt, const void* w, int64_t K, const float* x, int64_t M, const float* bias, float* y,
                 int64_t ldy, int64_t n0, int64_t n1);
inline constexpr int kSmallBatchX = 32;
}  // namespace avx512

namespace avx512bf16 {
/// dst[i] = x[i] rounded to bf16 (nearest-even by vcvtne2ps2bf16: denormals become ±0, NaN stays NaN, quieted), as
/// bits, for i < n.
void round_to_bf16(const float* x, int64_t n, uint16_t* dst);
/// y[n] = dot(w[n, :K], x) (+ bias[n]) for n in [n0, n1), w bf16 rows, x bf16 (round_to_bf16 of the activations).
void gemv(const void* w, int64_t K, const uint16_t* x, const float* bias, float* y, int64_t n0, int64_t n1);
/// y[m · ldy + n] = dot(w[n, :K], x_m) (+ bias[n]) for n in [n0, n1), m < M; w bf16 rows, x the M rows rounded by
/// round_to_bf16 and laid out by pack_small_batch_x.
void small_batch(const void* w, int64_t K, const uint16_t* x, int64_t M, const float* bias, float* y, int64_t ldy,
                 int64_t n0, int64_t n1);
}  // namespace avx512bf16

namespace amx {
/// Lays out bf16 rows xb[M, K] for the B tiles of linear_bf16, blocks [b0, b1) of 16 rows: block b, chunk c (32 k)
/// at dst + (b · ⌈K / 32⌉ + c) · 512 holds 16 tile rows p of 16 pairs (xb[16 b + m][32 c + 2p], .. + 1), m < 16;
/// zero past M and K.
void pack_x(const uint16_t* xb, int64_t M, int64_t K, int64_t b0, int64_t b1, uint16_t* dst);
/// y[m · ldy + n] = dot(w[n, :K], x_m) (+ bias[n]) for n in [n0, n1), m < M: w bf16 rows, x as pack_x lays it out.
/// Each output is one TDPBF16PS accumulator over the 32-wide chunks of K in order, whatever M (batch invariant).
/// Rows go in groups of 32 from n0 (the threads split N in whole groups).
void linear_bf16(const void* w, int64_t K, const uint16_t* xp, int64_t M, const float* bias, float* y, int64_t ldy,
                 int64_t n0, int64_t n1);
}  // namespace amx

/// Whether ops::linear of bf16 weights on `isa` takes the AMX kernels for every M (ISA AMX).
bool use_amx(Isa isa, DType wt);
/// y[M, N] = bf16(x)[M, K] · wᵀ (+ bias) on the AMX tiles, multi-threaded; w bf16 rows. Only where use_amx holds.
void amx_linear(const void* w, int64_t N, int64_t K, int64_t M, const float* x, const float* bias, float* y);

/// Whether bf16 weights on `isa` take the AVX-512 BF16 kernels, x rounded to bf16, on every path of ops::linear (GEMV
/// and small batch): ISA AVX512 and the CPU has AVX512_BF16.
bool use_bf16_kernels(Isa isa, DType wt);
/// Lays out bf16 rows xb[M, K] (row-major) for avx512bf16::small_batch, tiles [t0, t1) of small_batch_tiles(M):
/// the tile of rows [m0, m1) starts at dst + m0 · Kp (Kp = small_batch_padded_k(K)) and holds, step s after step,
/// the 32 elements [32 s, 32 s + 32) of each of its rows in turn (zero past K), so the kernel walks one stream of x per
/// tile. Moves bits only: every row keeps the rounding of round_to_bf16, the GEMV's.
void pack_small_batch_x(const uint16_t* xb, int64_t M, int64_t K, int64_t t0, int64_t t1, uint16_t* dst);
/// x[M, K] rounded to bf16 and laid out by pack_small_batch_x, in a buffer of the calling thread that stays valid
/// until its next call (multi-threaded for large M · K). Only where the CPU has AVX512_BF16.
const uint16_t* bf16_small_batch_activations(const float* x, int64_t M, int64_t K);
/// x[M, K] rounded to bf16 by avx512bf16::round_to_bf16, in a buffer of the calling thread that stays valid until
/// its next call (multi-threaded for large M · K). Only where the CPU has AVX512_BF16.
const uint16_t* bf16_activations(const float* x, int64_t M, int64_t K);

/// Where the GEMM's right-hand side comes from: weight rows [N, K] of any linear dtype (linear), or a row-major
/// f32 matrix [K, N] (matmul).
struct GemmRhs {
  DType dtype = DType::F32;
  const void* data = nullptr;
  bool rows_are_outputs = true;  // true: [N, K] (x · wᵀ); false: [K, N] (a · b)
};

/// y[M, N] = x[M, K] · rhs (+ bias[N]), multi-threaded, with the kernels of `isa` (every weight dtype converted
/// exactly to f32 panels; x stays f32).
void gemm(Isa isa, int64_t M, int64_t N, int64_t K, const float* x, const GemmRhs& rhs, const float* bias, float* y);
/// y[N] = w[N, K] · x[K] (+ bias), multi-threaded (bf16 weights: bf16(x) where use_bf16_kernels says so).
void gemv(Isa isa, DType wt, const void* w, int64_t N, int64_t K, const float* x, const float* bias, float* y);
/// Whether ops::linear of M rows against weights of dtype wt on `isa` takes small_batch (f32 / f16 / bf16, 2 <= M <=
/// small_batch_max_rows).
int64_t small_batch_max_rows(Isa isa, DType wt);
bool use_small_batch(Isa isa, DType wt, int64_t M);
/// y[M, N] = x[M, K] · wᵀ (+ bias) through the small-batch kernel of `isa`, multi-threaded (bf16 weights: bf16(x)
/// where use_bf16_kernels says so). Any M works (tests); ops::linear sends it what use_small_batch accepts.
void small_batch(Isa isa, DType wt, const void* w, int64_t N, int64_t K, int64_t M, const float* x, const float* bias,
                 float* y);

/// True when ferry_ops was linked with OpenBLAS (FERRY_HAVE_BLAS).
bool have_blas() noexcept;
/// OpenBLAS cblas_sgemm for y[M, N] = x[M, K] · (rows_are_outputs ? wᵀ : w) (+ bias); false when not linked.
bool blas_sgemm(int64_t M, int64_t N, int64_t K, const float* x, const float* w, bool rows_are_outputs,
                const float* bias, float* y);

}  // namespace ferry::ops::cpu
