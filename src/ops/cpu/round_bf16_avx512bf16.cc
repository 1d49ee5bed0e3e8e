// The rounding of activations to bf16 for the AVX-512 BF16 kernels of bf16 weights (linear_kernels.h: the GEMV
// and the small-batch kernel, every bf16 path of ops::linear on CPUs with AVX512_BF16): vcvtne2ps2bf16 rounds to
// nearest-even, flushes denormals to ±0 and keeps NaN a NaN (quieted), as llama.cpp and PyTorch's bf16 matmuls round.
// Everything here has internal linkage except the function, and no standard-library template is instantiated,
// so the linker cannot pick code of this file (built with -mavx512bf16) for a translation unit of a lower ISA.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() values, which -Wuninitialized reports in every caller
// (a false positive): silenced for this file, before the header is read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "linear_kernels.h"

namespace ferry::ops::cpu::avx512bf16 {
namespace {

inline __mmask16 low_mask(int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
}

// Elements [0, min(left, 32)) of p rounded to bf16 (zeros past them), in order.
inline __m512i round32(const float* p, int64_t left) {
  const __m512 lo = _mm512_maskz_loadu_ps(low_mask(left), p);
  const __m512 hi = left > 16 ? _mm512_maskz_loadu_ps(low_mask(left - 16), p + 16) : _mm512_setzero_ps();
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

}  // namespace

void round_to_bf16(const float* x, int64_t n, uint16_t* dst) {
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) _mm512_storeu_si512(dst + k, round32(x + k, 32));
  if (k < n) {
    const int64_t left = n - k;
    const __mmask32 m = static_cast<__mmask32>(left >= 32 ? 0xFFFFFFFFu : (1u << left) - 1u);
    _mm512_mask_storeu_epi16(dst + k, m, round32(x + k, left));
  }
}

}  // namespace ferry::ops::cpu::avx512bf16
