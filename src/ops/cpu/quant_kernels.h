// Kernels behind ops::linear for block-quantized weights (q8_0 ... q6_k, core/quant.h): decode and small batches.
//
// The activations are quantized too, as llama.cpp does: each run of 32 values of a row of x becomes 32 int8
// levels and one f32 scale (QBlock8; the largest magnitude maps to ±127, rounding to nearest even). A weight
// group of 32 elements reads as a·q + c (q small integers: a 4/5/6-bit level or an int8; a the group's scale; c
// its offset — the min of q4_1/q5_1/q4_k/q5_k, or a·(−8, −16, −32) for the symmetric types), so its dot product with
// an activation block is
//     d_x · a · Σ q·x_q + c · (d_x · Σ x_q)
// with Σ q·x_q an exact integer dot product (AVX2: vpmaddubsw + vpmaddwd; AVX-512 VNNI: vpdpbusd) and Σ x_q
// precomputed. Q6_K's groups have two scales (one per 16 elements), so a and c come per half.
//
// Accuracy: the only rounding besides f32 accumulation is x's quantization (relative error ≤ 1/254 per value at
// the block's largest magnitude); tests/ops/quant_linear_test.cc measures the result against the dequantized
// f32 weights.
//
// Prefill runs here too, in tiles of activation rows (see kQuantGemvMaxRows).
#pragma once

#include <cstdint>

#include "ferry/core/cpu_features.h"
#include "ferry/core/dtype.h"

namespace ferry::ops::cpu {

/// 32 activations as d · q[i]; dsum[h] = d · Σ q[16h .. 16h + 15] (each half, for Q6_K), dsum_all = dsum[0] + dsum[1].
struct QBlock8 {
  float d;
  float dsum_all;
  float dsum[2];
  int8_t q[32];
};
static_assert(sizeof(QBlock8) == 48);

/// Rows up to which linear runs these kernels on quantized weights (the rest go to the GEMM on dequantized
/// panels), and the tile of activation rows served per pass over the weights (each weight row is read from memory
/// once per tile). Measured on TinyLlama-shaped q8_0 / q4_k weights, 2 threads, 64-token prefill: 74 / 57 tok/s
/// here against 46 / 45 through the dequantizing GEMM (bf16 weights: 65).
inline constexpr int64_t kQuantGemvMaxRows = 1 << 20;
inline constexpr int64_t kQuantRowTile = 64;

struct QuantKernels {
  /// x[K] (K a multiple of 32) -> K / 32 blocks. Every ISA gives the same bytes.
  void (*quantize_x)(const float* x, int64_t K, QBlock8* out);
  /// y[m · ldy + n] = Σ_k w[n, k] · x_m[k] (+ bias[n]) for n in [n0, n1) and m < M (M ≤ 4), where x_m is the
  /// K / 32 blocks at xq + m · (K / 32) and w holds rows of dtype wt.
  void (*gemv)(DType wt, const void* w, int64_t K, const QBlock8* xq, int M, const float* bias, float* y, int64_t ldy,
               int64_t n0, int64_t n1);
};

const QuantKernels& quant_kernels(Isa isa);

namespace scalar {
void quantize_x(const float* x, int64_t K, QBlock8* out);
void qgemv(DType wt, const void* w, int64_t K, const QBlock8* xq, int M, const float* bias, float* y, int64_t ldy,
           int64_t n0, int64_t n1);
}  // namespace scalar
namespace avx2 {
void quantize_x(const float* x, int64_t K, QBlock8* out);
void qgemv(DType wt, const void* w, int64_t K, const QBlock8* xq, int M, const float* bias, float* y, int64_t ldy,
           int64_t n0, int64_t n1);
}  // namespace avx2
namespace avx512 {
void qgemv(DType wt, const void* w, int64_t K, const QBlock8* xq, int M, const float* bias, float* y, int64_t ldy,
           int64_t n0, int64_t n1);
}  // namespace avx512

/// y[M, N] = x[M, K] · wᵀ (+ bias) for quantized w [N, K], multi-threaded.
void quant_gemv(Isa isa, DType wt, const void* w, int64_t N, int64_t K, int64_t M, const float* x, const float* bias,
                float* y);

}  // namespace ferry::ops::cpu
