// Activations for the AVX-512 BF16 kernels of bf16 weights (see linear_kernels.h): whether a call takes them
// (use_bf16_kernels), x rounded to bf16 once per call for the GEMV (bf16_activations) and, for the small-batch
// kernel, laid out tile by tile (pack_small_batch_x, bf16_small_batch_activations).
#include <algorithm>
#include <vector>

#include "check.h"
#include "ferry/core/cpu_features.h"
#include "ferry/core/thread_pool.h"
#include "linear_kernels.h"

namespace ferry::ops::cpu {

bool use_bf16_kernels(Isa isa, DType wt) { return wt == DType::BF16 && isa >= Isa::AVX512 && cpu_has_avx512_bf16(); }

const uint16_t* bf16_activations(const float* x, int64_t M, int64_t K) {
#if !FERRY_X86_KERNELS
  (void)x, (void)M, (void)K;
  fail("ops::linear", "bf16 activations feed the AVX-512 BF16 kernels only (use_bf16_kernels says when)");
#else
  thread_local std::vector<uint16_t> buf;
  buf.resize(static_cast<std::size_t>(M * K));
  uint16_t* out = buf.data();
  // ~64 K elements per task: rounding runs at several elements per cycle, so only big batches are worth splitting.
  parallel_for(0, M, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, K)), [&](int64_t m0, int64_t m1) {
    avx512bf16::round_to_bf16(x + m0 * K, (m1 - m0) * K, out + m0 * K);
  });
  return out;
#endif
}

void pack_small_batch_x(const uint16_t* xb, int64_t M, int64_t K, int64_t t0, int64_t t1, uint16_t* dst) {
  const int64_t tiles = small_batch_tiles(M), Kp = small_batch_padded_k(K);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t m0 = small_batch_tile_start(M, tiles, t), mt = small_batch_tile_start(M, tiles, t + 1) - m0;
    uint16_t* out = dst + m0 * Kp;
    for (int64_t k = 0; k < Kp; k += 32)
      for (int64_t m = 0; m < mt; ++m, out += 32) {
        const int64_t len = std::min<int64_t>(32, std::max<int64_t>(0, K - k));
        const uint16_t* src = xb + (m0 + m) * K + k;
        std::copy(src, src + len, out);
        std::fill(out + len, out + 32, uint16_t{0});
      }
  }
}

const uint16_t* bf16_small_batch_activations(const float* x, int64_t M, int64_t K) {
  const uint16_t* xb = bf16_activations(x, M, K);
  thread_local std::vector<uint16_t> packed;
  packed.resize(static_cast<std::size_t>(M * small_batch_padded_k(K)));
  uint16_t* out = packed.data();
  const int64_t tiles = small_batch_tiles(M);
  parallel_for(0, tiles, std::max<int64_t>(1, (int64_t{1} << 16) / (kSmallBatchRowTile * std::max<int64_t>(1, K))),
               [&](int64_t t0, int64_t t1) { pack_small_batch_x(xb, M, K, t0, t1, out); });
  return out;
}

}  // namespace ferry::ops::cpu
