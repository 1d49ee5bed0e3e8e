// The quantized GEMM's driver (see quant_kernels.h; kernels in quant_gemm_avx512.cc). The loop nest is the f32
// GEMM's (gemm.cc):
//   for each pass over kQgMC activation rows:
//     1. repack the quantized activations of those rows into kQgMR-row panels, group by group (all threads);
//     2. split N into kQgNC-row tasks; a task walks K in blocks of kQgKC: it unpacks its weight block into
//        kQgNR-row strips in a per-thread buffer, then runs the microkernel over every (strip, panel) pair, the
//        strip (20-24 KiB) staying in L1 while the panels stream from L2.
#include <algorithm>
#include <cstring>

#include "ferry/core/thread_pool.h"
#include "gemm_blocking.h"
#include "quant_kernels.h"

namespace ferry::ops::cpu {
namespace {

// Group g (G elements) of activation row m, as the GEMV quantized it: its levels, d_x and d_x · Σ levels.
struct XGroup {
  const int8_t* q;
  float d, dsum;
};

XGroup x_group(const uint8_t* xq, std::size_t row_size, bool kblocks, int G, int64_t m, int64_t g) {
  const uint8_t* row = xq + static_cast<std::size_t>(m) * row_size;
  if (!kblocks) {
    const auto* b = reinterpret_cast<const QBlock8*>(row) + g;
    return {b->q, b->d, b->dsum_all};
  }
  const auto* b = reinterpret_cast<const QBlockK*>(row) + g * G / 256;
  const int off = static_cast<int>(g * G % 256);
  int sum = 0;
  for (int h = off / 16; h < (off + G) / 16; ++h) sum += b->bsum[h];
  return {b->q + off, b->d, b->d * static_cast<float>(sum)};
}

// Activation rows [m0, m0 + mr) (mr ≤ kQgMR; missing rows zero) × groups [0, groups) into one panel.
void pack_x_panel(const uint8_t* xq, std::size_t row_size, bool kblocks, int G, int64_t m0, int mr, int64_t groups,
                  uint8_t* panel) {
  const int64_t group_bytes = qgemm_x_group_bytes(G);
  for (int64_t g = 0; g < groups; ++g) {
    uint8_t* dst = panel + g * group_bytes;
    auto* scales = reinterpret_cast<float*>(dst + G * kQgMR);
    for (int r = 0; r < kQgMR; ++r) {
      if (r >= mr) {
        for (int c = 0; c < G / 4; ++c) std::memset(dst + (c * kQgMR + r) * 4, 0, 4);
        scales[r] = scales[kQgMR + r] = 0.0f;
        continue;
      }
      const XGroup xg = x_group(xq, row_size, kblocks, G, m0 + r, g);
      for (int c = 0; c < G / 4; ++c) std::memcpy(dst + (c * kQgMR + r) * 4, xg.q + 4 * c, 4);
      scales[r] = xg.d;
      scales[kQgMR + r] = xg.dsum;
    }
  }
}

// Per-thread weight block buffer (kQgNC rows × kQgKC elements, packed), reused across calls.
uint8_t* weight_block_buffer() {
  constexpr std::size_t kBytes = (kQgNC / kQgNR) * (kQgKC / 16) * (16 * kQgNR + 8 * kQgNR);  // the largest: G = 16
  thread_local AlignedArray<uint8_t> buf = aligned_array<uint8_t>(kBytes);
  return buf.get();
}

}  // namespace

int64_t quant_gemm_min_rows(DType wt) {
  if (wt == DType::Q6_K) return 64;
  return uses_kblocks(wt) ? 32 : 16;
}

bool use_quant_gemm(Isa isa, DType wt, int64_t M) { return isa >= Isa::AVX512 && M >= quant_gemm_min_rows(wt); }

void quant_gemm(DType wt, const void* w, int64_t N, int64_t K, int64_t M, const uint8_t* xq, std::size_t row_size,
                const float* bias, float* y) {
  static_assert(kQgKC % 256 == 0 && kQgNC % kQgNR == 0, "blocks must hold whole K-quant blocks and whole strips");
  const int G = qgemm_group(wt);
  const bool kblocks = uses_kblocks(wt);
  const int64_t groups = K / G, kc_groups = kQgKC / G;
  const int64_t xg_bytes = qgemm_x_group_bytes(G), wg_bytes = qgemm_w_group_bytes(G);
  const int64_t panel_bytes = groups * xg_bytes;
  const int64_t k_blocks = (groups + kc_groups - 1) / kc_groups;
  // Balanced passes of at most kQgMC rows, each a whole number of panels.
  const int64_t passes = (M + kQgMC - 1) / kQgMC;
  const int64_t rows_per_pass = ((M + passes - 1) / passes + kQgMR - 1) / kQgMR * kQgMR;
  const int64_t max_panels = (std::min(rows_per_pass, M) + kQgMR - 1) / kQgMR;
  AlignedArray<uint8_t> xp = aligned_array<uint8_t>(static_cast<std::size_t>(max_panels * panel_bytes));

  for (int64_t m0 = 0; m0 < M; m0 += rows_per_pass) {
    const int64_t mc = std::min(rows_per_pass, M - m0);
    const int64_t panels = (mc + kQgMR - 1) / kQgMR;
    parallel_for(0, panels, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t i = p0; i < p1; ++i) {
        const int mr = static_cast<int>(std::min<int64_t>(kQgMR, mc - i * kQgMR));
        pack_x_panel(xq, row_size, kblocks, G, m0 + i * kQgMR, mr, groups, xp.get() + i * panel_bytes);
      }
    });
    const int64_t n_blocks = (N + kQgNC - 1) / kQgNC;
    parallel_for(0, n_blocks, 1, [&](int64_t b0, int64_t b1) {
      uint8_t* wp = weight_block_buffer();
      for (int64_t nb = b0; nb < b1; ++nb) {
        const int64_t n0 = nb * kQgNC, nc = std::min(kQgNC, N - n0);
        const int64_t strips = (nc + kQgNR - 1) / kQgNR;
        for (int64_t kb = 0; kb < k_blocks; ++kb) {
          const int64_t g0 = kb * kc_groups, ng = std::min(kc_groups, groups - g0);
          const int64_t strip_bytes = ng * wg_bytes;
          for (int64_t s = 0; s < strips; ++s)
            avx512::qgemm_pack_w(wt, w, K, n0 + s * kQgNR, static_cast<int>(std::min<int64_t>(kQgNR, nc - s * kQgNR)),
                                 g0, ng, wp + s * strip_bytes);
          for (int64_t s = 0; s < strips; ++s) {
            const int nr = static_cast<int>(std::min<int64_t>(kQgNR, nc - s * kQgNR));
            const float* bias_s = bias ? bias + n0 + s * kQgNR : nullptr;
            for (int64_t i = 0; i < panels; ++i) {
              const int mr = static_cast<int>(std::min<int64_t>(kQgMR, mc - i * kQgMR));
              avx512::qgemm_micro(G, ng, xp.get() + i * panel_bytes + g0 * xg_bytes, wp + s * strip_bytes,
                                  y + (m0 + i * kQgMR) * N + n0 + s * kQgNR, N, mr, nr, kb > 0, bias_s);
            }
          }
        }
      }
    });
  }
}

}  // namespace ferry::ops::cpu
