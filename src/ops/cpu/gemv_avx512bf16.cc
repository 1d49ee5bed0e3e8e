// AVX-512 BF16 GEMV for bf16 weights (see linear_kernels.h; the driver, gemv() in gemv.cc, rounds x to bf16 once
// per call with round_to_bf16, as the small-batch kernel's driver does): y[n] = Σ_k w[n, k] · x[k].
//
// A bf16 weight row's 32 elements fill one zmm, and so do the 32 matching elements of the bf16 x: vdpbf16ps
// multiplies the two bf16 of each 32-bit lane of both and adds the two products to that lane's f32 accumulator,
// so the pairs line up with no shuffle and no conversion — one load and one vdpbf16ps per 32 weights, against two
// loads, two conversions (shift, mask) and two FMAs per 32 for the f32 path (avx2::gemv on x in f32), which ran out
// of instructions between misses before memory was saturated.
// Every output is the dot product of bf16_dot_avx512bf16.h, the small-batch kernel's: one accumulator per row, so
// a row's result is bit for bit the small-batch kernel's for that row (the batch invariance of linear_kernels.h).
// One accumulator is one dependency chain of vdpbf16ps per row; it still outruns memory: one-chain rows measured as
// fast as four accumulators per row (bench_ops Gemv/bf16, 4096², 11008 × 4096, 5632 × 2048, 2048 × 5632: 1.23 / 3.0 /
// 0.62 / 0.76 ms against 1.24 / 3.4 / 0.84 / 1.05, medians of 3 on the loaded dev VM, within its noise).
//
// Traversal as in gemv_avx2.cc (decode is memory-bound; keep one sequential stream per thread where x stays in L1):
//  - K <= kOneRowMaxK: one row at a time;
//  - longer rows: eight rows at a time, so x is loaded once per eight rows.
// x in bf16 is half the bytes of the f32 x, so the one-row traversal holds x in half an L1 up to K = 8192 (at
// K = 5632, TinyLlama's down projection, one row at a time measured 1.16 ms against 1.33 for eight, medians of 3,
// in an earlier version with four accumulators per row).
// K tails (K mod 32, odd K included) go through one masked step: the lanes past K are zero in both operands.
// Everything here has internal linkage except the kernel, and no standard-library template is instantiated, so the
// linker cannot pick code of this file (built with -mavx512bf16) for a translation unit of a lower ISA.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() values, which -Wuninitialized reports in every caller
// (a false positive): silenced for this file, before the header is read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "bf16_dot_avx512bf16.h"
#include "linear_kernels.h"

#define FERRY_UNROLL _Pragma("GCC unroll 16")

namespace ferry::ops::cpu::avx512bf16 {
namespace {

constexpr int64_t kOneRowMaxK = 8192;  // x (bf16) fills half of a 32 KiB L1

inline const uint16_t* row_ptr(const void* w, int64_t n, int64_t K) {
  return static_cast<const uint16_t*>(w) + static_cast<std::size_t>(n) * static_cast<std::size_t>(K);
}

// R rows at once (R independent chains, R row streams), one 32-element step per row at a time.
template <int R>
void rows(const void* w, int64_t K, const uint16_t* x, const float* bias, float* y, int64_t n) {
  const uint16_t* r[R];
  FERRY_UNROLL
  for (int j = 0; j < R; ++j) r[j] = row_ptr(w, n + j, K);
  __m512 a[R];
  FERRY_UNROLL
  for (auto& v : a) v = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    const __m512bh xv = load_bf16x32(x + k);
    FERRY_UNROLL
    for (int j = 0; j < R; ++j) a[j] = dot_step(a[j], load_bf16x32(r[j] + k), xv);
  }
  if (k < K) {
    const __mmask32 mask = tail_mask(K - k);
    const __m512bh xv = load_tail(x + k, mask);
    FERRY_UNROLL
    for (int j = 0; j < R; ++j) a[j] = dot_step(a[j], load_tail(r[j] + k, mask), xv);
  }
  FERRY_UNROLL
  for (int j = 0; j < R; ++j) y[n + j] = dot_result(a[j], bias, n + j);
}

}  // namespace

void gemv(const void* w, int64_t K, const uint16_t* x, const float* bias, float* y, int64_t n0, int64_t n1) {
  int64_t n = n0;
  if (K > kOneRowMaxK)
    for (; n + 8 <= n1; n += 8) rows<8>(w, K, x, bias, y, n);
  for (; n < n1; ++n) rows<1>(w, K, x, bias, y, n);
}

}  // namespace ferry::ops::cpu::avx512bf16
