// Kernels behind ops::linear and ops::matmul, one set per ISA (scalar in gemv.cc / gemm.cc, AVX2 in
// gemv_avx2.cc / gemm_avx2.cc), chosen once per op call by linear_kernels().
//
// Legend: M = rows of the activations (tokens), N = output features, K = input features (the reduction).
// GEMV (M == 1): each weight row is read once, converted in registers and dotted with x; a thread walks its rows
// eight at a time so eight row streams are in flight (one stream per thread does not saturate memory).
// GEMM (M > 1): the blocked loop of gemm.cc packs x into MR-row panels and, per thread, converts a weight block
// into NR-column f32 panels, then runs the MR × NR register-blocked microkernel over them.
#pragma once

#include <cstdint>

#include "ferry/core/cpu_features.h"
#include "ferry/core/dtype.h"

namespace ferry::ops::cpu {

inline constexpr int kMR = 6;    // microkernel rows (tokens)
inline constexpr int kNR = 16;   // microkernel columns (output features): two 8-lane vectors
inline constexpr int64_t kKC = 256;  // reduction block: an NR × KC f32 weight panel is 16 KiB (L1)
inline constexpr int64_t kNC = 64;   // output features per task: a KC × NC packed weight block is 64 KiB (L2)
inline constexpr int64_t kMC = 288;  // activation rows per pass: each weight block is converted once per pass

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
};

const LinearKernels& linear_kernels(Isa isa);

namespace scalar {
void gemv(DType wt, const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n0, int64_t n1);
void micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr, bool accumulate,
           const float* bias);
void pack_panel(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t k0, int64_t kc, float* panel);
}  // namespace scalar
namespace avx2 {
void gemv(DType wt, const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n0, int64_t n1);
void micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr, bool accumulate,
           const float* bias);
void pack_panel(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t k0, int64_t kc, float* panel);
}  // namespace avx2

/// Where the GEMM's right-hand side comes from: weight rows [N, K] of any linear dtype (linear), or a row-major
/// f32 matrix [K, N] (matmul).
struct GemmRhs {
  DType dtype = DType::F32;
  const void* data = nullptr;
  bool rows_are_outputs = true;  // true: [N, K] (x · wᵀ); false: [K, N] (a · b)
};

/// y[M, N] = x[M, K] · rhs (+ bias[N]), multi-threaded, with the kernels of `isa`.
void gemm(Isa isa, int64_t M, int64_t N, int64_t K, const float* x, const GemmRhs& rhs, const float* bias, float* y);
/// y[N] = w[N, K] · x[K] (+ bias), multi-threaded.
void gemv(Isa isa, DType wt, const void* w, int64_t N, int64_t K, const float* x, const float* bias, float* y);

/// True when ferry_ops was linked with OpenBLAS (FERRY_HAVE_BLAS).
bool have_blas() noexcept;
/// OpenBLAS cblas_sgemm for y[M, N] = x[M, K] · (rows_are_outputs ? wᵀ : w) (+ bias); false when not linked.
bool blas_sgemm(int64_t M, int64_t N, int64_t K, const float* x, const float* w, bool rows_are_outputs,
                const float* bias, float* y);

}  // namespace ferry::ops::cpu
