// ops::linear of bf16 weights on AMX (see linear_kernels.h, "AMX"): x rounded to bf16 as the AVX-512 BF16 paths
// round it, laid out for the tiles (amx::pack_x), then the weight rows split among the threads in whole groups of
// the kernel (tile_gemm_amx.cc).
#include <algorithm>
#include <vector>

#include "check.h"
#include "ferry/core/thread_pool.h"
#include "linear_kernels.h"

namespace ferry::ops::cpu {

bool use_amx(Isa isa, DType wt) { return wt == DType::BF16 && isa >= Isa::AMX; }

void amx_linear(const void* w, int64_t N, int64_t K, int64_t M, const float* x, const float* bias, float* y) {
#if !FERRY_X86_KERNELS
  (void)w, (void)N, (void)K, (void)M, (void)x, (void)bias, (void)y;
  fail("ops::linear", "the AMX kernels exist on x86-64 builds only (use_amx says when)");
#else
  if (M <= 0 || N <= 0) return;
  const uint16_t* xb = bf16_activations(x, M, K);
  const int64_t mblocks = (M + 15) / 16, chunks = (K + 31) / 32;
  thread_local std::vector<uint16_t> packed;
  packed.resize(static_cast<std::size_t>(mblocks * chunks * 512));
  uint16_t* xp = packed.data();
  parallel_for(0, mblocks, std::max<int64_t>(1, 64 / std::max<int64_t>(1, chunks)),
               [&](int64_t b0, int64_t b1) { amx::pack_x(xb, M, K, b0, b1, xp); });
  // Groups of 32 weight rows. One block of x (the memory-bound regime): tasks of >= ~64 KiB of weights, as the
  // GEMV's; more: each group a task (its rows are reused for every block of x).
  const int64_t group = 32, groups = (N + group - 1) / group;
  const int64_t grain = mblocks == 1 ? std::max<int64_t>(1, (int64_t{64} << 10) / std::max<int64_t>(1, group * K * 2))
                                     : 1;
  parallel_for(0, groups, grain, [&](int64_t g0, int64_t g1) {
    amx::linear_bf16(w, K, xp, M, bias, y, N, g0 * group, std::min(g1 * group, N));
  });
#endif
}

}  // namespace ferry::ops::cpu
