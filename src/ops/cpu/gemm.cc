// The blocked GEMM driver (shared by every ISA) and the scalar microkernel (see linear_kernels.h).
//
// Loop nest, for each pass over kMC activation rows:
//   1. pack x[rows, :] into MR-row panels, one block per KC slice of K (all threads, once per pass);
//   2. split N into kNC-column tasks; a task walks the KC slices: it converts its weight block (NC × KC, any
//      dtype) into NR-column f32 panels in a per-thread buffer, then runs the microkernel over every
//      (NR panel, MR panel) pair. A weight panel (16 KiB) stays in L1 while the activation panels stream from
//      L2; the task's output block (MC × NC floats) stays in L2 across the KC slices.
// Each weight element is therefore converted once per pass, and each output element is written K / KC times.
// bf16 weights convert exactly to f32 here, with x kept in f32, on every ISA; ops::linear sends them here only where
// the CPU lacks AVX512_BF16 (use_bf16_kernels: its small-batch kernel takes every row count).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "ferry/core/thread_pool.h"
#include "gemm_blocking.h"
#include "linear_kernels.h"
#include "to_f32.h"

namespace ferry::ops::cpu {
namespace scalar {

void micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr, bool accumulate,
           const float* bias) {
  float acc[kMR][kNR] = {};
  for (int64_t k = 0; k < kc; ++k)
    for (int i = 0; i < kMR; ++i) {
      const float ai = a[k * kMR + i];
      for (int j = 0; j < kNR; ++j) acc[i][j] += ai * b[k * kNR + j];
    }
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) {
      float& out = c[i * ldc + j];
      out = (accumulate ? out : bias ? bias[j] : 0.0f) + acc[i][j];
    }
}

void pack_panel(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t k0, int64_t kc, float* panel) {
  const std::size_t esize = dtype_size(wt);
  float row[kKC];
  for (int j = 0; j < kNR; ++j) {
    if (j >= rows) {
      for (int64_t k = 0; k < kc; ++k) panel[k * kNR + j] = 0.0f;
      continue;
    }
    for (int64_t k0r = 0; k0r < kc; k0r += kKC) {  // kc ≤ kKC in the driver; the loop keeps this safe regardless
      const int64_t len = std::min(kKC, kc - k0r);
      to_f32_scalar(wt, static_cast<const char*>(w) + (static_cast<std::size_t>(n0 + j) * K + k0 + k0r) * esize, row, len);
      for (int64_t k = 0; k < len; ++k) panel[(k0r + k) * kNR + j] = row[k];
    }
  }
}

}  // namespace scalar

namespace {

using Buffer = AlignedArray<float>;

// Per-thread weight panel buffer (kNC × kKC floats), reused across calls.
float* weight_block_buffer() {
  thread_local Buffer buf = aligned_array<float>(static_cast<std::size_t>(kNC * kKC));
  return buf.get();
}

// Packs x[m0 .. m0+mr, k0 .. k0+kc) into one panel: dst[k * MR + i]; rows past mr are zero.
void pack_x_panel(const float* x, int64_t K, int64_t m0, int mr, int64_t k0, int64_t kc, float* dst) {
  for (int64_t k = 0; k < kc; ++k) {
    for (int i = 0; i < mr; ++i) dst[k * kMR + i] = x[(m0 + i) * K + k0 + k];
    for (int i = mr; i < kMR; ++i) dst[k * kMR + i] = 0.0f;
  }
}

// Packs columns [n0, n0 + nc) × rows [k0, k0 + kc) of the right-hand side into NR-column panels:
// panel p holds dst[p * kc * NR + k * NR + j]; columns past N are zero.
void pack_rhs_block(const LinearKernels& kern, const GemmRhs& rhs, int64_t N, int64_t K, int64_t n0, int64_t nc,
                    int64_t k0, int64_t kc, float* dst) {
  const int64_t panels = (nc + kNR - 1) / kNR;
  if (rhs.rows_are_outputs) {
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t first = n0 + p * kNR;
      const int rows = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(kNR, std::min(n0 + nc, N) - first)));
      kern.pack_panel(rhs.dtype, rhs.data, K, first, rows, k0, kc, dst + p * kc * kNR);
    }
  } else {
    const auto* b = static_cast<const float*>(rhs.data);
    for (int64_t p = 0; p < panels; ++p) {
      float* panel = dst + p * kc * kNR;
      const int64_t c0 = n0 + p * kNR, width = std::min<int64_t>(kNR, std::min(n0 + nc, N) - c0);
      for (int64_t k = 0; k < kc; ++k) {
        std::memcpy(panel + k * kNR, b + (k0 + k) * N + c0, static_cast<std::size_t>(width) * sizeof(float));
        for (int64_t j = width; j < kNR; ++j) panel[k * kNR + j] = 0.0f;
      }
    }
  }
}

// The prefetcher of the weight rows [n0, n0 + nc) × columns [k0, k0 + KC) of a [N, K] weight (none for a [K, N]
// right-hand side, whose block is contiguous).
RowPrefetcher weight_rows(const GemmRhs& rhs, int64_t N, int64_t K, int64_t n0, int64_t nc, int64_t k0) {
  if (!rhs.rows_are_outputs || k0 >= K) return {};
  return RowPrefetcher(rhs.data, dtype_nbytes(rhs.dtype, K), dtype_nbytes(rhs.dtype, k0),
                       dtype_nbytes(rhs.dtype, std::min(kKC, K - k0)), N, n0, nc);
}

}  // namespace

void gemm(Isa isa, int64_t M, int64_t N, int64_t K, const float* x, const GemmRhs& rhs, const float* bias, float* y) {
  const LinearKernels& kern = linear_kernels(isa);
  if (K == 0) {  // an empty reduction: y = bias (or 0)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) y[m * N + n] = bias ? bias[n] : 0.0f;
    return;
  }
  // Balanced passes of at most kMC rows, each a whole number of MR panels.
  const int64_t passes = (M + kMC - 1) / kMC;
  const int64_t rows_per_pass = ((M + passes - 1) / passes + kMR - 1) / kMR * kMR;
  const int64_t k_blocks = (K + kKC - 1) / kKC;
  Buffer xp = aligned_array<float>(static_cast<std::size_t>(std::min(rows_per_pass, (M + kMR - 1) / kMR * kMR) * K));

  for (int64_t m0 = 0; m0 < M; m0 += rows_per_pass) {
    const int64_t mc = std::min(rows_per_pass, M - m0);
    const int64_t m_panels = (mc + kMR - 1) / kMR;
    const int64_t mpad = m_panels * kMR;
    // 1. x panels: block kb starts at xp + k0 * mpad; panel i of it at + i * kc * MR.
    parallel_for(0, m_panels * k_blocks, 8, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t kb = t / m_panels, i = t % m_panels;
        const int64_t k0 = kb * kKC, kc = std::min(kKC, K - k0);
        const int mr = static_cast<int>(std::min<int64_t>(kMR, mc - i * kMR));
        pack_x_panel(x, K, m0 + i * kMR, mr, k0, kc, xp.get() + k0 * mpad + i * kc * kMR);
      }
    });
    // 2. output-feature blocks.
    const int64_t n_blocks = (N + kNC - 1) / kNC;
    parallel_for(0, n_blocks, 1, [&](int64_t b0, int64_t b1) {
      float* wp = weight_block_buffer();
      for (int64_t nb = b0; nb < b1; ++nb) {
        const int64_t n0 = nb * kNC, nc = std::min(kNC, N - n0);
        const int64_t n_panels = (nc + kNR - 1) / kNR;
        for (int64_t kb = 0; kb < k_blocks; ++kb) {
          const int64_t k0 = kb * kKC, kc = std::min(kKC, K - k0);
          pack_rhs_block(kern, rhs, N, K, n0, nc, k0, kc, wp);
          // While this block computes, pull the next block's weights towards the cache, one row per microkernel
          // call: the weight rows are far apart in memory, so the hardware prefetcher does not see them coming.
          RowPrefetcher next = kb + 1 < k_blocks ? weight_rows(rhs, N, K, n0, nc, k0 + kc)
                               : nb + 1 < b1     ? weight_rows(rhs, N, K, n0 + kNC, kNC, 0)
                                                 : RowPrefetcher();
          for (int64_t p = 0; p < n_panels; ++p) {
            const int nr = static_cast<int>(std::min<int64_t>(kNR, nc - p * kNR));
            const float* bp = wp + p * kc * kNR;
            const float* bias_p = bias ? bias + n0 + p * kNR : nullptr;
            for (int64_t i = 0; i < m_panels; ++i) {
              const int mr = static_cast<int>(std::min<int64_t>(kMR, mc - i * kMR));
              float* c = y + (m0 + i * kMR) * N + n0 + p * kNR;
              kern.micro(kc, xp.get() + k0 * mpad + i * kc * kMR, bp, c, N, mr, nr, kb > 0, bias_p);
              next.step();
            }
          }
          while (next.step()) {
          }
        }
      }
    });
  }
}

}  // namespace ferry::ops::cpu
