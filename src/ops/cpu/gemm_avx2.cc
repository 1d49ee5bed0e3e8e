// AVX2/FMA GEMM microkernel (see linear_kernels.h): a 6 × 16 block of outputs held in twelve ymm accumulators,
// fed per k by two weight vectors and six broadcast activations (12 FMAs for 8 loads, the Haswell-era BLIS
// shape; 15 of the 16 ymm registers live).
#include "linear_kernels.h"
#include "simd_avx2.h"

namespace ferry::ops::cpu::avx2 {

void micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr, bool accumulate,
           const float* bias) {
  static_assert(kMR == 6 && kNR == 16, "the AVX2 microkernel is written for 6 x 16");
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * kNR), b1 = _mm256_loadu_ps(b + k * kNR + 8);
    const float* ak = a + k * kMR;
    __m256 av = _mm256_broadcast_ss(ak + 0);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(ak + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(ak + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(ak + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(ak + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(ak + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
  }
  const __m256 acc[kMR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (nr == kNR) {
    __m256 base0 = _mm256_setzero_ps(), base1 = base0;
    if (!accumulate && bias) base0 = _mm256_loadu_ps(bias), base1 = _mm256_loadu_ps(bias + 8);
    for (int i = 0; i < mr; ++i) {
      float* ci = c + i * ldc;
      __m256 o0 = accumulate ? _mm256_loadu_ps(ci) : base0, o1 = accumulate ? _mm256_loadu_ps(ci + 8) : base1;
      _mm256_storeu_ps(ci, _mm256_add_ps(o0, acc[i][0]));
      _mm256_storeu_ps(ci + 8, _mm256_add_ps(o1, acc[i][1]));
    }
    return;
  }
  alignas(32) float tile[kMR][kNR];
  for (int i = 0; i < kMR; ++i) _mm256_store_ps(tile[i], acc[i][0]), _mm256_store_ps(tile[i] + 8, acc[i][1]);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) {
      float& out = c[i * ldc + j];
      out = (accumulate ? out : bias ? bias[j] : 0.0f) + tile[i][j];
    }
}

}  // namespace ferry::ops::cpu::avx2
