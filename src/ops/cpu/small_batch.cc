// The small-batch linear (batched decode, see linear_kernels.h): the scalar kernel and the multi-threaded driver
// shared by every ISA.
//
// The scalar kernel converts each weight row in runs into a stack buffer, as scalar::gemv does, and dots every
// activation row with the run while it is in L1, with the same eight partial sums per row as scalar::gemv (so each
// output equals scalar::gemv of that row bit for bit). It is the reference the SIMD kernels are tested against and
// the fallback on CPUs without AVX2.
//
// The driver prepares x once per call for bf16 weights — rounded to bf16 and packed per tile for
// avx512bf16::small_batch where use_bf16_kernels holds (bf16_small_batch_activations), else arranged for the f32
// kernels (bf16_x_block) — then splits N among the threads in blocks of whole kernel row blocks, chunks of at least ~64 KiB of weights as the GEMV does.
#include <algorithm>
#include <vector>

#include "ferry/core/thread_pool.h"
#include "linear_kernels.h"
#include "to_f32.h"

namespace ferry::ops::cpu {
namespace scalar {

void small_batch(DType wt, const void* w, int64_t K, const float* x, int64_t M, const float* bias, float* y,
                 int64_t ldy, int64_t n0, int64_t n1) {
  constexpr int64_t kRun = 256, kRows = 64;  // kRows activation rows per pass over a weight row
  float row[kRun];
  float part[kRows][8];
  const auto* base = static_cast<const char*>(w);
  const std::size_t esize = dtype_size(wt);
  for (int64_t n = n0; n < n1; ++n) {
    const char* wr = base + static_cast<std::size_t>(n) * static_cast<std::size_t>(K) * esize;
    for (int64_t m0 = 0; m0 < M; m0 += kRows) {
      const int64_t mc = std::min(kRows, M - m0);
      for (int64_t m = 0; m < mc; ++m) std::fill(part[m], part[m] + 8, 0.0f);
      for (int64_t k0 = 0; k0 < K; k0 += kRun) {
        const int64_t len = std::min(kRun, K - k0);
        to_f32_scalar(wt, wr + static_cast<std::size_t>(k0) * esize, row, len);
        for (int64_t m = 0; m < mc; ++m) {
          const float* xm = x + (m0 + m) * K + k0;
          for (int64_t k = 0; k < len; ++k) part[m][k & 7] += row[k] * xm[k];
        }
      }
      for (int64_t m = 0; m < mc; ++m) {
        const float* p = part[m];
        const float acc = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
        y[(m0 + m) * ldy + n] = bias ? acc + bias[n] : acc;
      }
    }
  }
}

}  // namespace scalar

int64_t small_batch_max_rows(Isa isa, DType wt) {
  if (wt != DType::F32 && wt != DType::F16 && wt != DType::BF16) return 0;
  if (use_bf16_kernels(isa, wt)) return kSmallBatchMaxRowsBf16;
  if (isa < Isa::AVX512) return kSmallBatchMaxRowsAvx2;
  return wt == DType::F32 ? kSmallBatchMaxRowsF32 : kSmallBatchMaxRows;
}

bool use_small_batch(Isa isa, DType wt, int64_t M) { return M >= 2 && M <= small_batch_max_rows(isa, wt); }

void small_batch(Isa isa, DType wt, const void* w, int64_t N, int64_t K, int64_t M, const float* x, const float* bias,
                 float* y) {
  const auto& kern = linear_kernels(isa);
  if (M <= 0 || N <= 0) return;
  // Blocks of 4 rows (a multiple of every kernel's row block, so only the last chunk has a partial block).
  constexpr int64_t kGroup = 4;
  const int64_t row_bytes = std::max<int64_t>(1, K * static_cast<int64_t>(dtype_size(wt)));
  const int64_t grain = std::max<int64_t>(1, (int64_t{64} << 10) / (row_bytes * kGroup));
#if FERRY_X86_KERNELS
  if (use_bf16_kernels(isa, wt)) {
    const uint16_t* xb = bf16_small_batch_activations(x, M, K);
    return parallel_for(0, (N + kGroup - 1) / kGroup, grain, [&](int64_t g0, int64_t g1) {
      avx512bf16::small_batch(w, K, xb, M, bias, y, N, g0 * kGroup, std::min(g1 * kGroup, N));
    });
  }
#endif
  const float* xk = x;
  thread_local std::vector<float> arranged;
  if (wt == DType::BF16 && kern.bf16_x_block > 0 && K >= kern.bf16_x_block) {
    const int64_t B = kern.bf16_x_block, whole = K / B * B;
    arranged.resize(static_cast<std::size_t>(M * K));
    float* out = arranged.data();
    parallel_for(0, M, std::max<int64_t>(1, 16384 / K), [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        const float* src = x + m * K;
        float* dst = out + m * K;
        for (int64_t k = 0; k < whole; k += B)
          for (int64_t i = 0; i < B / 2; ++i) dst[k + i] = src[k + 2 * i], dst[k + B / 2 + i] = src[k + 2 * i + 1];
        std::copy(src + whole, src + K, dst + whole);
      }
    });
    xk = out;
  }
  parallel_for(0, (N + kGroup - 1) / kGroup, grain, [&](int64_t g0, int64_t g1) {
    kern.small_batch(wt, w, K, xk, M, bias, y, N, g0 * kGroup, std::min(g1 * kGroup, N));
  });
}

}  // namespace ferry::ops::cpu
