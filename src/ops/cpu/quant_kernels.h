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
// Prefill runs here too, in tiles of activation rows (see kQuantRowTile).
#pragma once

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
  /// dtype wt and x_m is row m of xq: K / 32 QBlock8 or, for the K-quants, K / 256 QBlockK, rows back to back.
  void (*gemv)(DType wt, const void* w, int64_t K, const void* xq, int M, const float* bias, float* y, int64_t ldy,
               int64_t n0, int64_t n1);
  /// Activation rows one gemv call serves per decoded weight group: 4 (scalar, AVX2) or 8 (AVX-512, 32 registers).
  int max_rows;
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

/// y[M, N] = x[M, K] · wᵀ (+ bias) for quantized w [N, K], multi-threaded.
void quant_gemv(Isa isa, DType wt, const void* w, int64_t N, int64_t K, int64_t M, const float* x, const float* bias,
                float* y);

}  // namespace ferry::ops::cpu
