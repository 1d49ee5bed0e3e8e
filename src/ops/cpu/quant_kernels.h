// Kernels behind ops::linear for block-quantized weights (q8_0 ... q6_k, core/quant.h): decode and small batches.
//
// The activations are quantized too, as llama.cpp does, in one of two layouts matching the weight type:
//  - QBlock8 for the 32-element types (q8_0, q4_0, q4_1, q5_0, q5_1): each run of 32 values of a row of x becomes
//    32 int8 levels and one f32 scale (the largest magnitude maps to ±127, rounding to nearest even). A weight
//    group of 32 reads as a·q + c (q a 4/5-bit level or an int8; a the group's scale; c its offset: the min of
//    q4_1/q5_1, or a·(−8, −16) for the symmetric types), so its dot product with an activation block is
//        d_x · a · Σ q·x_q + c · (d_x · Σ x_q)
//    with Σ q·x_q an exact integer dot product (AVX2: vpmaddubsw + vpmaddwd; AVX-512 VNNI: vpdpbusd).
//  - QBlockK for the K-quants (q4_k, q5_k, q6_k): 256 values, one f32 scale, and the sums of each 16 levels. The
//    sub-block scales of a K-quant block are small integers (6-bit, or int8 for q6_k), so the whole 256-element
//    dot product stays in integers — Σ_j sc_j · Σ q·x_q (vpmaddubsw, then vpmaddwd / AVX-512 vpdpwssd against the
//    scales) — and is converted to float once per block: d · d_x · that − dmin · d_x · Σ_j m_j · Σ x_q (q4_k, q5_k;
//    q6_k's −32 offset the same way).
//
// Accuracy: the only rounding besides f32 accumulation is x's quantization (relative error ≤ 1/254 of the block's
// largest magnitude per value); tests/ops/quant_linear_test.cc measures the result against the dequantized f32
// weights, and tests/models/gguf_llama_cpp_test.cc the logits of real models.
//
// Prefill runs through the quantized GEMM below (AVX-512 VNNI and AVX2, from quant_gemm_min_rows rows), and through
// the GEMV in tiles of activation rows (see kQuantRowTile) below that and without AVX2.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/core/cpu_features.h"
#include "ferry/core/dtype.h"

namespace ferry::ops::cpu {

/// 32 activations as d · q[i]; dsum[h] = d · Σ q[16h .. 16h + 15], dsum_all = dsum[0] + dsum[1].
struct QBlock8 {
  float d;
  float dsum_all;
  float dsum[2];
  int8_t q[32];
};
static_assert(sizeof(QBlock8) == 48);

/// 256 activations as d · q[i]; bsum[i] = Σ q[16i .. 16i + 15] (ggml's block_q8_K holds the same).
struct QBlockK {
  float d;
  int16_t bsum[16];
  int8_t q[256];
};
static_assert(sizeof(QBlockK) == 292);

/// Whether weights of `wt` take QBlockK activations (the K-quants) rather than QBlock8.
inline bool uses_kblocks(DType wt) { return dtype_block_size(wt) == 256; }

/// Two consecutive QBlock8 of a row, A = group 2p and B = group 2p + 1 (B all zeros past the end of an odd row),
/// laid out for the SIMD GEMV of the 4/5-bit 32-element types (q4_0, q4_1, q5_0, q5_1). Their weight blocks store
/// elements 0-15 of a group as low nibbles and 16-31 as high ones, so the GEMV decodes the two groups together into
/// one vector of low nibbles (A's, then B's) and one of high nibbles and multiplies them with q[0..31] and q[32..63];
/// the 32-bit sums land in the low 128-bit lane for A and the high lane for B, which d and dsum match lane by lane.
/// Per pair that is half the conversions, scale products and FMAs of decoding the groups one by one.
struct QPair8 {
  int8_t q[64];  ///< A.q[0..15], B.q[0..15], A.q[16..31], B.q[16..31]
  float d[8];    ///< A.d four times, then B.d four times
  float dsum[8];  ///< A.dsum_all, 0, 0, 0, B.dsum_all, 0, 0, 0 (one lane per group: its four lanes are summed)
};
static_assert(sizeof(QPair8) == 128);

/// Whether the SIMD GEMV takes weights of `wt` with activations as QPair8 (rather than QBlock8).
inline bool uses_pairs(DType wt) {
  return wt == DType::Q4_0 || wt == DType::Q4_1 || wt == DType::Q5_0 || wt == DType::Q5_1;
}
/// Rows of `groups` QBlock8 (K / 32) -> ceil(groups / 2) QPair8.
void pair_x(const QBlock8* x, int64_t groups, QPair8* out);

/// The tile of activation rows served per pass over the weights: each weight row is read from memory once per
/// tile, the tile's activation blocks stay in L2. Prefill runs here rather than through the f32 GEMM on dequantized
/// weight panels, which measured slower (TinyLlama-shaped q8_0 / q4_k weights, 2 threads, 64-token prefill: 74 /
/// 57 tok/s here against 46 / 45 dequantizing; bf16 weights through the GEMM: 65).
inline constexpr int64_t kQuantRowTile = 64;

struct QuantKernels {
  /// x[K] (K a multiple of 32, resp. 256) -> K / 32 QBlock8, resp. K / 256 QBlockK. Every ISA gives the same bytes.
  void (*quantize_x)(const float* x, int64_t K, QBlock8* out);
  void (*quantize_x_k)(const float* x, int64_t K, QBlockK* out);
  /// y[m · ldy + n] = Σ_k w[n, k] · x_m[k] (+ bias[n]) for n in [n0, n1) and m < M (M ≤ max_rows), where w holds rows of
  /// dtype wt and x_m is row m of xq: K / 32 QBlock8 (or QPair8, see `pairs`) or, for the K-quants, K / 256 QBlockK,
  /// rows back to back.
  void (*gemv)(DType wt, const void* w, int64_t K, const void* xq, int M, const float* bias, float* y, int64_t ldy,
               int64_t n0, int64_t n1);
  /// Activation rows one gemv call serves per decoded weight group: 4 (scalar, AVX2) or 8 (AVX-512, 32 registers).
  int max_rows;
  /// Whether gemv takes the activations of uses_pairs() types as QPair8 rows (ceil(K / 64) pairs each; the SIMD
  /// kernels) rather than QBlock8 (the scalar one).
  bool pairs;
};

const QuantKernels& quant_kernels(Isa isa);

namespace scalar {
void quantize_x(const float* x, int64_t K, QBlock8* out);
void quantize_x_k(const float* x, int64_t K, QBlockK* out);
void qgemv(DType wt, const void* w, int64_t K, const void* xq, int M, const float* bias, float* y, int64_t ldy,
           int64_t n0, int64_t n1);
}  // namespace scalar
namespace avx2 {
void quantize_x(const float* x, int64_t K, QBlock8* out);
void quantize_x_k(const float* x, int64_t K, QBlockK* out);
void qgemv(DType wt, const void* w, int64_t K, const void* xq, int M, const float* bias, float* y, int64_t ldy,
           int64_t n0, int64_t n1);
}  // namespace avx2
namespace avx512 {
void qgemv(DType wt, const void* w, int64_t K, const void* xq, int M, const float* bias, float* y, int64_t ldy,
           int64_t n0, int64_t n1);
}  // namespace avx512

// ---- Prefill: the quantized GEMM (quant_gemm.cc drives; quant_gemm_avx512.cc, quant_gemm_avx2.cc compute) -------
//
// The GEMV above works in dot-product form: per (weight row, activation row) pair and 32-element group it does one
// integer dot product and then converts and scales it, so at prefill sizes it spends more instructions applying
// scales than multiplying. The GEMM works in outer-product form instead, like the f32 GEMM: a vector holds 16
// weight rows, and vpdpbusd multiplies 4 levels of each of those rows with the same 4 activation levels (one 32-bit
// broadcast), so one group of G elements for 16 weight rows and one activation row is G/4 vpdpbusd, and its scale is
// applied once to all 16 (one conversion, one multiply, two FMAs).
//
// Both sides are repacked for that, group by group (G = 32, or 16 for q6_k whose scales cover 16 elements):
//  - a weight strip of kQgNR rows: the levels as unsigned bytes u (q8_0: q + 128), chunk by chunk ([G/4][kQgNR][4]),
//    then the scales a[kQgNR] and offsets c[kQgNR] as f32, so that the weight is a·u + c;
//  - an activation panel of kQgMR rows: the int8 levels the GEMV uses (QBlock8 / QBlockK), chunk by chunk
//    ([G/4][kQgMR][4]), then d_x[kQgMR] and s_x[kQgMR] = d_x · Σ levels of the group;
// and the group's contribution to y[m, n] is  a_n · d_x,m · Σ u·x_q  +  c_n · s_x,m  (the integer sum exact).
// The arithmetic is the GEMV's up to f32 rounding and summation order: same activation quantization, same
// dequantized weights. The AVX2 kernels (below) use the same layouts with their own tile, 8-lane vectors and
// vpmaddubsw for vpdpbusd.
inline constexpr int kQgMR = 6;         // activation rows per panel (12 f32 + 12 int32 accumulators)
inline constexpr int kQgNR = 32;        // weight rows per strip (two 16-lane vectors)
inline constexpr int64_t kQgKC = 512;   // elements of K per block: a strip's block is 20-24 KiB (L1)
inline constexpr int64_t kQgNC = 64;    // weight rows per task
inline constexpr int64_t kQgMC = 512;   // activation rows per pass (each weight block is unpacked once per pass)
/// Rows of activations from which ops::linear takes the quantized GEMM on `isa` rather than the GEMV tiles (a
/// number no M reaches without AVX2): the measured crossovers (bench/bench_quant_gemm.cc, 2048 × 2048).
/// AVX-512: 16 for the 32-element types, 32 for q4_k / q5_k (whose GEMV keeps a whole 256-element block in
/// integers), 64 for q6_k (16-element groups: twice the scale work). AVX2: 16 for q4_0 / q4_1, 12 for q5_0 / q5_1 /
/// q8_0 / q4_k / q5_k, 32 for q6_k (quant_gemm.cc gives the figures).
int64_t quant_gemm_min_rows(Isa isa, DType wt);

/// For the types whose weights are a·(u − offset) (q8_0, q4_0, q5_0, q6_k; c = −offset·a), that offset, else 0.
inline int qgemm_symmetric_offset(DType wt) {
  switch (wt) {
    case DType::Q8_0: return 128;
    case DType::Q4_0: return 8;
    case DType::Q5_0: return 16;
    case DType::Q6_K: return 32;
    default: return 0;
  }
}
/// The group size the GEMM uses for weights of `wt`: 32, or 16 for q6_k.
inline int qgemm_group(DType wt) { return wt == DType::Q6_K ? 16 : 32; }
/// Bytes of one group of a packed weight strip of nr rows, resp. of an activation panel of mr rows.
inline int64_t qgemm_w_group_bytes(int G, int nr = kQgNR) { return int64_t{G} * nr + 8 * nr; }
inline int64_t qgemm_x_group_bytes(int G, int mr = kQgMR) { return int64_t{G} * mr + 8 * mr; }

namespace avx512 {
/// Packs weight rows [n0, n0 + rows) (rows ≤ kQgNR; the rest of the strip zero) × groups [g0, g0 + ng) of w ([N, K],
/// dtype wt) into `strip` as described above.
void qgemm_pack_w(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t g0, int64_t ng, uint8_t* strip);
/// As qgemm_pack_w, with the levels of the symmetric types (qgemm_symmetric_offset) signed: u − offset, c = 0.
void qgemm_pack_w_signed(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t g0, int64_t ng,
                         uint8_t* strip);
/// y[i · ldy + j] (i < mr, j < nr) = (accumulate ? y : bias ? bias[j] : 0) + Σ over ng groups of the packed activation
/// panel xp and weight strip wp.
void qgemm_micro(int G, int64_t ng, const uint8_t* xp, const uint8_t* wp, float* y, int64_t ldy, int mr, int nr,
                 bool accumulate, const float* bias);
}  // namespace avx512

// The AVX2 kernels (quant_gemm_avx2.cc): the same layouts and arithmetic on 256-bit vectors of 8 weight rows, the
// integer sums through vpmaddubsw + vpaddw + vpmaddwd (that file says why they stay exact); kQgKC / kQgNC / kQgMC as
// above (a strip's block is 10-12 KiB).
inline constexpr int kQg2MR = 4;   // activation rows per panel (8 int16/int32 + 8 f32 accumulators)
inline constexpr int kQg2NR = 16;  // weight rows per strip (two 8-lane vectors)

namespace avx2 {
/// As avx512::qgemm_pack_w, strips of kQg2NR rows; q8_0 levels stay signed (a = d, c = 0).
void qgemm_pack_w(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t g0, int64_t ng, uint8_t* strip);
/// As avx512::qgemm_micro for a kQg2MR × kQg2NR tile of weights `wt`.
void qgemm_micro(DType wt, int64_t ng, const uint8_t* xp, const uint8_t* wp, float* y, int64_t ldy, int mr, int nr,
                 bool accumulate, const float* bias);
}  // namespace avx2

// The AMX kernel (quant_gemm_amx.cc, ISA AMX): the AVX-512 weight strips as the B operand of TDPBSUD (a strip's two
// 16-row halves are two B tiles; for the symmetric types signed levels and TDPBSSD, so no offset term), the
// activations as the A operand: panels of kQgAmxMR rows laid out row by row within each group ([kQgAmxMR][G] levels,
// then d_x and s_x as above). One tile product per strip half and group gives its 16 × 16 integer sums, scaled and
// summed as the AVX-512 microkernel does.
inline constexpr int kQgAmxMR = 16;  // activation rows per panel: the rows of an A tile

namespace amx {
/// Configures the calling thread's tiles for qgemm_micro with groups of G levels (once per task), resp. releases them.
void qgemm_begin(int G);
void qgemm_end();
/// As avx512::qgemm_micro, for a kQgAmxMR-row panel of row-major groups and a kQgNR-row strip; between qgemm_begin(G)
/// and qgemm_end(). With `signed_w` the strip's levels are signed and its offsets zero (qgemm_pack_w_signed: the
/// symmetric types), which saves the offset term.
void qgemm_micro(int G, bool signed_w, int64_t ng, const uint8_t* xp, const uint8_t* wp, float* y, int64_t ldy, int mr,
                 int nr, bool accumulate, const float* bias);
}  // namespace amx

/// Rows of activations from which the quantized GEMM runs on the AMX tiles rather than AVX-512 VNNI, on an AMX CPU
/// (q6_k never: its 16-element groups double the scaling per tile product). Measured, bench_quant_gemm, Sapphire
/// Rapids, 2 threads, 2048 × 2048, AMX time ÷ AVX-512 time over the other seven types: at 8-12 rows 1.08-1.21 (a
/// 16-row panel half empty), 16 rows 0.89-1.04, 32 rows 0.87-0.94, 64 rows 0.91-0.98, 512 rows 0.85-0.91; q6_k 1.09
/// at 512.
inline constexpr int64_t kQgAmxMinRows = 32;
/// The ISA whose quantized GEMM kernels run M rows of weights `wt` on `isa`: AMX from kQgAmxMinRows rows (not q6_k),
/// else AVX512 (or isa itself below it).
Isa quant_gemm_isa(Isa isa, DType wt, int64_t M);

/// Whether ops::linear of M rows of weights `wt` on `isa` takes the quantized GEMM.
bool use_quant_gemm(Isa isa, DType wt, int64_t M);
/// y[M, N] = x · wᵀ (+ bias) through the quantized GEMM on `isa` (AVX2 or AVX512; the kernels of the ISA given), with
/// xq the activations quantized as quant_gemv does (rows of `row_size` bytes); multi-threaded.
void quant_gemm(Isa isa, DType wt, const void* w, int64_t N, int64_t K, int64_t M, const uint8_t* xq,
                std::size_t row_size, const float* bias, float* y);

/// y[M, N] = x[M, K] · wᵀ (+ bias) for quantized w [N, K], multi-threaded: through the quantized GEMM where
/// use_quant_gemm says so (unless `allow_gemm` is false: benchmarks compare the two), the GEMV otherwise.
void quant_gemv(Isa isa, DType wt, const void* w, int64_t N, int64_t K, int64_t M, const float* x, const float* bias,
                float* y, bool allow_gemm = true);

}  // namespace ferry::ops::cpu
