// The blocked GEMM driver for bf16 weights on AVX-512 BF16 CPUs (see linear_kernels.h; kernels in
// gemm_avx512bf16.cc), and bf16_activations, the rounding of x the bf16 GEMV and small-batch drivers use (the same
// conversion as the GEMM's pack_x). The loop nest is gemm.cc's, on bf16 pairs instead of f32:
//   for each pass over kBf16MC activation rows:
//     1. round x[rows, :] to bf16 and pack it into MR-row pair panels, one block per KC slice (all threads);
//     2. split N into kBf16NC-column tasks; a task walks the KC slices: it transposes its weight block (NC × KC
//        bf16, no conversion) into NR-column pair panels in a per-thread buffer, then runs the microkernel over
//        every (NR panel, MR panel) pair, the weight panel (16 KiB) staying in L1 while the x panels stream from L2.
#include <algorithm>
#include <vector>

#include "ferry/core/cpu_features.h"
#include "ferry/core/thread_pool.h"
#include "gemm_blocking.h"
#include "linear_kernels.h"

namespace ferry::ops::cpu {
namespace {

using Words = AlignedArray<uint32_t>;

// Per-thread weight block buffer (kBf16NC × kBf16KC bf16), reused across calls.
uint32_t* weight_block_buffer() {
  thread_local Words buf = aligned_array<uint32_t>(static_cast<std::size_t>(kBf16NC * kBf16KC / 2));
  return buf.get();
}

// The prefetcher of the bf16 weight rows [n0, n0 + nc) × columns [k0, k0 + KC).
RowPrefetcher bf16_rows(const void* w, int64_t N, int64_t K, int64_t n0, int64_t nc, int64_t k0) {
  if (k0 >= K) return {};
  return RowPrefetcher(w, static_cast<std::size_t>(2 * K), static_cast<std::size_t>(2 * k0),
                       static_cast<std::size_t>(2 * std::min(kBf16KC, K - k0)), N, n0, nc);
}

}  // namespace

bool use_gemm_bf16(Isa isa, DType wt) { return wt == DType::BF16 && isa >= Isa::AVX512 && cpu_has_avx512_bf16(); }

const uint16_t* bf16_activations(const float* x, int64_t M, int64_t K) {
  thread_local std::vector<uint16_t> buf;
  buf.resize(static_cast<std::size_t>(M * K));
  uint16_t* out = buf.data();
  // ~64 K elements per task: rounding runs at several elements per cycle, so only big batches are worth splitting.
  parallel_for(0, M, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, K)), [&](int64_t m0, int64_t m1) {
    avx512bf16::round_to_bf16(x + m0 * K, (m1 - m0) * K, out + m0 * K);
  });
  return out;
}

void gemm_bf16(int64_t M, int64_t N, int64_t K, const float* x, const void* w, const float* bias, float* y) {
  constexpr int64_t MR = kBf16MR, NR = kBf16NR, KC = kBf16KC, NC = kBf16NC;
  static_assert(KC % 2 == 0, "K blocks must hold whole pairs");
  // Balanced passes of at most kBf16MC rows, each a whole number of MR panels.
  const int64_t passes = (M + kBf16MC - 1) / kBf16MC;
  const int64_t rows_per_pass = ((M + passes - 1) / passes + MR - 1) / MR * MR;
  const int64_t k_blocks = (K + KC - 1) / KC;
  const int64_t max_mpad = std::min(rows_per_pass, (M + MR - 1) / MR * MR);
  // x panels of one pass: block kb starts at word kb · KC/2 · mpad, panel i of it at + i · pairs · MR.
  Words xp = aligned_array<uint32_t>(static_cast<std::size_t>(max_mpad * k_blocks * (KC / 2)));

  for (int64_t m0 = 0; m0 < M; m0 += rows_per_pass) {
    const int64_t mc = std::min(rows_per_pass, M - m0);
    const int64_t m_panels = (mc + MR - 1) / MR;
    const int64_t mpad = m_panels * MR;
    parallel_for(0, m_panels * k_blocks, 8, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t kb = t / m_panels, i = t % m_panels;
        const int64_t k0 = kb * KC, kc = std::min(KC, K - k0);
        const int mr = static_cast<int>(std::min(MR, mc - i * MR));
        avx512bf16::pack_x(x, K, m0 + i * MR, mr, k0, kc, xp.get() + k0 / 2 * mpad + i * ((kc + 1) / 2) * MR);
      }
    });
    const int64_t n_blocks = (N + NC - 1) / NC;
    parallel_for(0, n_blocks, 1, [&](int64_t b0, int64_t b1) {
      uint32_t* wp = weight_block_buffer();
      for (int64_t nb = b0; nb < b1; ++nb) {
        const int64_t n0 = nb * NC, nc = std::min(NC, N - n0);
        const int64_t n_panels = (nc + NR - 1) / NR;
        for (int64_t kb = 0; kb < k_blocks; ++kb) {
          const int64_t k0 = kb * KC, kc = std::min(KC, K - k0), pairs = (kc + 1) / 2;
          for (int64_t p = 0; p < n_panels; ++p) {
            const int rows = static_cast<int>(std::min(NR, nc - p * NR));
            avx512bf16::pack_w(w, K, n0 + p * NR, rows, k0, kc, wp + p * pairs * NR);
          }
          RowPrefetcher next = kb + 1 < k_blocks ? bf16_rows(w, N, K, n0, nc, k0 + kc)
                               : nb + 1 < b1     ? bf16_rows(w, N, K, n0 + NC, NC, 0)
                                                 : RowPrefetcher();
          for (int64_t p = 0; p < n_panels; ++p) {
            const int nr = static_cast<int>(std::min(NR, nc - p * NR));
            const uint32_t* bp = wp + p * pairs * NR;
            const float* bias_p = bias ? bias + n0 + p * NR : nullptr;
            for (int64_t i = 0; i < m_panels; ++i) {
              const int mr = static_cast<int>(std::min(MR, mc - i * MR));
              float* c = y + (m0 + i * MR) * N + n0 + p * NR;
              avx512bf16::micro(pairs, xp.get() + k0 / 2 * mpad + i * pairs * MR, bp, c, N, mr, nr, kb > 0, bias_p);
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
