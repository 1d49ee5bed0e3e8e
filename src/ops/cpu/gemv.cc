// Scalar GEMV and the multi-threaded GEMV driver (see linear_kernels.h). The scalar kernel converts each weight
// row in short runs into a stack buffer and dots it with eight partial sums; it is the reference the AVX2 kernel
// is tested against and the fallback on CPUs without AVX2. For bf16 weights where use_bf16_kernels holds, the driver
// rounds x to bf16 once per call (bf16_activations) and runs avx512bf16::gemv on it.
#include <algorithm>

#include "ferry/core/thread_pool.h"
#include "linear_kernels.h"
#include "to_f32.h"

namespace ferry::ops::cpu {
namespace scalar {

void gemv(DType wt, const void* w, int64_t K, const float* x, const float* bias, float* y, int64_t n0, int64_t n1) {
  constexpr int64_t kRun = 256;
  float row[kRun];
  const auto* base = static_cast<const char*>(w);
  const std::size_t esize = dtype_size(wt);
  for (int64_t n = n0; n < n1; ++n) {
    const char* wr = base + static_cast<std::size_t>(n) * static_cast<std::size_t>(K) * esize;
    float part[8] = {};
    for (int64_t k0 = 0; k0 < K; k0 += kRun) {
      const int64_t len = std::min(kRun, K - k0);
      to_f32_scalar(wt, wr + static_cast<std::size_t>(k0) * esize, row, len);
      for (int64_t k = 0; k < len; ++k) part[k & 7] += row[k] * x[k0 + k];
    }
    float acc = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    y[n] = bias ? acc + bias[n] : acc;
  }
}

}  // namespace scalar

void gemv(Isa isa, DType wt, const void* w, int64_t N, int64_t K, const float* x, const float* bias, float* y) {
  const auto& kern = linear_kernels(isa);
  // Work is split in groups of 8 rows (the AVX2 kernel's row block), chunks of at least ~64 KiB of weights so
  // the pool's dispatch cost stays small next to the streaming.
  constexpr int64_t kGroup = 8;
  const int64_t row_bytes = std::max<int64_t>(1, K * static_cast<int64_t>(dtype_size(wt)));
  const int64_t grain = std::max<int64_t>(1, (int64_t{64} << 10) / (row_bytes * kGroup));
#if FERRY_X86_KERNELS
  if (use_bf16_kernels(isa, wt)) {
    const uint16_t* xb = bf16_activations(x, 1, K);
    return parallel_for(0, (N + kGroup - 1) / kGroup, grain, [&](int64_t g0, int64_t g1) {
      avx512bf16::gemv(w, K, xb, bias, y, g0 * kGroup, std::min(g1 * kGroup, N));
    });
  }
#endif
  parallel_for(0, (N + kGroup - 1) / kGroup, grain, [&](int64_t g0, int64_t g1) {
    kern.gemv(wt, w, K, x, bias, y, g0 * kGroup, std::min(g1 * kGroup, N));
  });
}

}  // namespace ferry::ops::cpu
