// The quantized GEMM's driver (see quant_kernels.h; kernels in quant_gemm_avx512.cc and quant_gemm_avx2.cc, which
// differ in their tile: panels of MR activation rows and strips of NR weight rows, 6 × 32 and 4 × 16). The loop nest
// is the f32 GEMM's (gemm.cc):
//   for each pass over kQgMC activation rows:
//     1. repack the quantized activations of those rows into MR-row panels, group by group (all threads);
//     2. split N into kQgNC-row tasks; a task walks K in blocks of kQgKC: it unpacks its weight block into NR-row
//        strips in a per-thread buffer, then runs the microkernel over every (strip, panel) pair, the strip
//        (AVX-512: 20-24 KiB, AVX2: 10-12 KiB) staying in L1 while the panels stream from L2.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "check.h"
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

// Activation rows [m0, m0 + mr) (mr ≤ MR; missing rows zero) × groups [0, groups) into one panel of MR rows: each
// group's levels chunk by chunk ([G/4][MR][4], the VNNI kernels' broadcasts) or, with `by_rows`, row by row
// ([MR][G], an AMX A tile).
void pack_x_panel(const uint8_t* xq, std::size_t row_size, bool kblocks, int G, int MR, bool by_rows, int64_t m0,
                  int mr, int64_t groups, uint8_t* panel) {
  const int64_t group_bytes = qgemm_x_group_bytes(G, MR);
  for (int64_t g = 0; g < groups; ++g) {
    uint8_t* dst = panel + g * group_bytes;
    auto* scales = reinterpret_cast<float*>(dst + G * MR);
    for (int r = 0; r < MR; ++r) {
      if (r >= mr) {
        if (by_rows) std::memset(dst + r * G, 0, static_cast<std::size_t>(G));
        else
          for (int c = 0; c < G / 4; ++c) std::memset(dst + (c * MR + r) * 4, 0, 4);
        scales[r] = scales[MR + r] = 0.0f;
        continue;
      }
      const XGroup xg = x_group(xq, row_size, kblocks, G, m0 + r, g);
      if (by_rows) std::memcpy(dst + r * G, xg.q, static_cast<std::size_t>(G));
      else
        for (int c = 0; c < G / 4; ++c) std::memcpy(dst + (c * MR + r) * 4, xg.q + 4 * c, 4);
      scales[r] = xg.d;
      scales[MR + r] = xg.dsum;
    }
  }
}

// Per-thread weight block buffer (kQgNC rows × kQgKC elements, packed), reused across calls: kQgNC · (KC/G) · (G + 8)
// bytes whatever the strip width, the most for G = 16.
uint8_t* weight_block_buffer() {
  constexpr std::size_t kBytes = kQgNC * (kQgKC / 16) * (16 + 8);
  thread_local AlignedArray<uint8_t> buf = aligned_array<uint8_t>(kBytes);
  return buf.get();
}

// One ISA's kernels and tile: panels of mr activation rows, strips of nr weight rows. The packed layouts are the same
// for both ISAs but for the tile (and q8_0's levels: unsigned for AVX-512, signed for AVX2).
struct Kernels {
  int mr, nr;
  bool x_by_rows;        // panels laid out row by row within a group (AMX)
  void (*begin)(int G);  // around each task's microkernel calls (AMX: tile configuration), or nullptr
  void (*end)();
  void (*pack_w)(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t g0, int64_t ng, uint8_t* strip);
  void (*micro)(DType wt, int64_t ng, const uint8_t* xp, const uint8_t* wp, float* y, int64_t ldy, int mr, int nr,
                bool accumulate, const float* bias);
};

const Kernels& kernels(Isa isa) {
#if !FERRY_X86_KERNELS
  (void)isa;
  fail("ops::linear", "the quantized GEMM has x86 kernels only (use_quant_gemm says when to call it)");
#else
  static const Kernels kamx{kQgAmxMR,
                            kQgNR,
                            true,
                            amx::qgemm_begin,
                            amx::qgemm_end,
                            avx512::qgemm_pack_w_signed,
                            [](DType wt, int64_t ng, const uint8_t* xp, const uint8_t* wp, float* y, int64_t ldy,
                               int mr, int nr, bool accumulate, const float* bias) {
                              amx::qgemm_micro(qgemm_group(wt), qgemm_symmetric_offset(wt) != 0, ng, xp, wp, y, ldy, mr,
                                               nr, accumulate, bias);
                            }};
  static const Kernels k512{kQgMR,
                            kQgNR,
                            false,
                            nullptr,
                            nullptr,
                            avx512::qgemm_pack_w,
                            [](DType wt, int64_t ng, const uint8_t* xp, const uint8_t* wp, float* y, int64_t ldy,
                               int mr, int nr, bool accumulate, const float* bias) {
                              avx512::qgemm_micro(qgemm_group(wt), ng, xp, wp, y, ldy, mr, nr, accumulate, bias);
                            }};
  static const Kernels k2{kQg2MR, kQg2NR, false, nullptr, nullptr, avx2::qgemm_pack_w, avx2::qgemm_micro};
  return isa >= Isa::AMX ? kamx : isa >= Isa::AVX512 ? k512 : k2;
#endif
}

}  // namespace

int64_t quant_gemm_min_rows(Isa isa, DType wt) {
  if (isa >= Isa::AVX512) {
    if (wt == DType::Q6_K) return 64;
    return uses_kblocks(wt) ? 32 : 16;
  }
  if (isa >= Isa::AVX2) {
    // Measured on an AVX2-only CPU (Zen 2, 2 threads; bench/bench_quant_gemm.cc, 2048 × 2048, medians of 5; the
    // GEMV tiles' time ÷ the GEMM's): q4_0 / q4_1 0.78 at 8 rows, 0.98 at 12, 1.11 at 16 (their GEMV decodes two
    // groups per step, QPair8); q5_0 / q5_1 0.88-0.91, 1.08-1.12, 1.22-1.26; q8_0 0.89, 1.04, 1.14; q4_k / q5_k
    // 1.01, 1.22, 1.36; q6_k (16-element groups, the strongest GEMV) 0.94 at 16, 1.15 at 32, 1.26 at 48.
    if (wt == DType::Q6_K) return 32;
    if (wt == DType::Q4_0 || wt == DType::Q4_1) return 16;
    return 12;
  }
  return std::numeric_limits<int64_t>::max();  // no quantized GEMM without AVX2
}

bool use_quant_gemm(Isa isa, DType wt, int64_t M) { return M >= quant_gemm_min_rows(isa, wt); }

Isa quant_gemm_isa(Isa isa, DType wt, int64_t M) {
  if (isa < Isa::AMX) return isa;
  return wt != DType::Q6_K && M >= kQgAmxMinRows ? Isa::AMX : Isa::AVX512;
}

void quant_gemm(Isa isa, DType wt, const void* w, int64_t N, int64_t K, int64_t M, const uint8_t* xq,
                std::size_t row_size, const float* bias, float* y) {
  static_assert(kQgKC % 256 == 0 && kQgNC % kQgNR == 0 && kQgNC % kQg2NR == 0,
                "blocks must hold whole K-quant blocks and whole strips");
  if (isa < Isa::AVX2) fail("ops::linear", "the quantized GEMM needs AVX2 (use_quant_gemm says when to call it)");
  const Kernels& kern = kernels(isa);
  const int MR = kern.mr, NR = kern.nr;
  const int G = qgemm_group(wt);
  const bool kblocks = uses_kblocks(wt);
  const int64_t groups = K / G, kc_groups = kQgKC / G;
  const int64_t xg_bytes = qgemm_x_group_bytes(G, MR), wg_bytes = qgemm_w_group_bytes(G, NR);
  const int64_t panel_bytes = groups * xg_bytes;
  const int64_t k_blocks = (groups + kc_groups - 1) / kc_groups;
  const std::size_t row_bytes = dtype_nbytes(wt, K);
  // Balanced passes of at most kQgMC rows, each a whole number of panels.
  const int64_t passes = (M + kQgMC - 1) / kQgMC;
  const int64_t rows_per_pass = ((M + passes - 1) / passes + MR - 1) / MR * MR;
  const int64_t max_panels = (std::min(rows_per_pass, M) + MR - 1) / MR;
  AlignedArray<uint8_t> xp = aligned_array<uint8_t>(static_cast<std::size_t>(max_panels * panel_bytes));

  for (int64_t m0 = 0; m0 < M; m0 += rows_per_pass) {
    const int64_t mc = std::min(rows_per_pass, M - m0);
    const int64_t panels = (mc + MR - 1) / MR;
    parallel_for(0, panels, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t i = p0; i < p1; ++i) {
        const int mr = static_cast<int>(std::min<int64_t>(MR, mc - i * MR));
        pack_x_panel(xq, row_size, kblocks, G, MR, kern.x_by_rows, m0 + i * MR, mr, groups, xp.get() + i * panel_bytes);
      }
    });
    const int64_t n_blocks = (N + kQgNC - 1) / kQgNC;
    // Weight rows [n, n + NR) ∩ [0, N), elements of K block kb, prefetched into L2 (if `any`).
    auto prefetch_weights = [&](int64_t n, int64_t kb, bool any) {
      if (!any) return;
      const int64_t e0 = kb * kQgKC;
      const std::size_t off = dtype_nbytes(wt, e0), len = dtype_nbytes(wt, std::min(K, e0 + kQgKC) - e0);
      for (int64_t r = n; r < std::min(n + NR, N); ++r) {
        const uint8_t* p = static_cast<const uint8_t*>(w) + static_cast<std::size_t>(r) * row_bytes + off;
        for (std::size_t b = 0; b < len; b += 64) __builtin_prefetch(p + b, 0, 2);
      }
    };
    // With several K blocks the partial sums go to a per-thread buffer of the task's rows × kQgNC columns rather than
    // to y: y's rows are N floats apart, often a multiple of 4 KiB, so the 16 rows of an AMX panel (6 of AVX-512)
    // fall into one L1 set and evict one another at every K block. Measured, 512 × 2048 × 2048 q8_0, Sapphire Rapids,
    // 2 threads (bench_quant_gemm, y / buffer): AMX 7.1 / 6.1 ms, AVX-512 7.8 / 7.6, AVX2 23.2 / 21.4.
    const bool buffered = k_blocks > 1;
    parallel_for(0, n_blocks, 1, [&](int64_t b0, int64_t b1) {
      uint8_t* wp = weight_block_buffer();
      thread_local std::vector<float> acc;
      if (buffered) acc.resize(static_cast<std::size_t>(rows_per_pass * kQgNC));
      const int64_t ldo = buffered ? kQgNC : N;
      if (kern.begin) kern.begin(G);
      for (int64_t nb = b0; nb < b1; ++nb) {
        const int64_t n0 = nb * kQgNC, nc = std::min(kQgNC, N - n0);
        const int64_t strips = (nc + NR - 1) / NR;
        float* out = buffered ? acc.data() : y + m0 * N + n0;
        for (int64_t kb = 0; kb < k_blocks; ++kb) {
          const int64_t g0 = kb * kc_groups, ng = std::min(kc_groups, groups - g0);
          const int64_t strip_bytes = ng * wg_bytes;
          for (int64_t s = 0; s < strips; ++s)
            kern.pack_w(wt, w, K, n0 + s * NR, static_cast<int>(std::min<int64_t>(NR, nc - s * NR)), g0, ng,
                        wp + s * strip_bytes);
          for (int64_t s = 0; s < strips; ++s) {
            const int nr = static_cast<int>(std::min<int64_t>(NR, nc - s * NR));
            const float* bias_s = bias ? bias + n0 + s * NR : nullptr;
            // Meanwhile the weights the next unpacking reads come into L2: this strip's rows in the next K block (or
            // the next task's first). Each row is a run of only 4-9 cache lines there (512 elements), too short for
            // the hardware prefetchers, and the unpacking otherwise waits on L3 / memory: +5-30% at M = 64 (most for
            // q6_k, 210 bytes per 256 weights), +1-3% at M = 512, on both ISAs.
            prefetch_weights(kb + 1 < k_blocks ? n0 + s * NR : n0 + kQgNC + s * NR, kb + 1 < k_blocks ? kb + 1 : 0,
                             kb + 1 < k_blocks || nb + 1 < b1);
            for (int64_t i = 0; i < panels; ++i) {
              const int mr = static_cast<int>(std::min<int64_t>(MR, mc - i * MR));
              kern.micro(wt, ng, xp.get() + i * panel_bytes + g0 * xg_bytes, wp + s * strip_bytes,
                         out + i * MR * ldo + s * NR, ldo, mr, nr, kb > 0, bias_s);
            }
          }
        }
        if (buffered)
          for (int64_t r = 0; r < mc; ++r)
            std::memcpy(y + (m0 + r) * N + n0, out + r * kQgNC, static_cast<std::size_t>(nc) * sizeof(float));
      }
      if (kern.end) kern.end();
    });
  }
}

}  // namespace ferry::ops::cpu
