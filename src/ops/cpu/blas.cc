// The OpenBLAS seam: cblas_sgemm for f32 GEMMs when ferry_ops is linked with BLAS (FERRY_HAVE_BLAS). linear and
// matmul do not call it today (linear.cc says why); the benchmarks use it as the reference for the blocked GEMM.
#include <climits>

#include "linear_kernels.h"

#ifdef FERRY_HAVE_BLAS
#include <cblas.h>
#endif

namespace ferry::ops::cpu {

bool have_blas() noexcept {
#ifdef FERRY_HAVE_BLAS
  return true;
#else
  return false;
#endif
}

bool blas_sgemm(int64_t M, int64_t N, int64_t K, const float* x, const float* w, bool rows_are_outputs,
                const float* bias, float* y) {
#ifdef FERRY_HAVE_BLAS
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX || M * K > INT_MAX || N * K > INT_MAX) return false;
  float beta = 0.0f;
  if (bias) {  // y starts as the bias rows, and sgemm adds x·w to it (beta = 1)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) y[m * N + n] = bias[n];
    beta = 1.0f;
  }
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, rows_are_outputs ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, x, k, w,
              rows_are_outputs ? k : n, beta, y, n);
  return true;
#else
  (void)M, (void)N, (void)K, (void)x, (void)w, (void)rows_are_outputs, (void)bias, (void)y;
  return false;
#endif
}

}  // namespace ferry::ops::cpu
