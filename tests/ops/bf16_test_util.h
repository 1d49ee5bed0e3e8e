// Helpers for the tests of the AVX-512 BF16 linear kernels (bf16 weights, x rounded to bf16): a scalar model of
// the rounding and a double-precision reference on the rounded activations.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ferry/core/cpu_features.h"

namespace ferry::ops::optest {

/// Whether this CPU runs the bf16 kernels (ISA AVX512 and AVX512_BF16), i.e. cpu::use_bf16_kernels can hold.
inline bool have_avx512_bf16() { return cpu_supports(Isa::AVX512) && cpu_has_avx512_bf16(); }

#define SKIP_WITHOUT_AVX512_BF16() \
  if (!::ferry::ops::optest::have_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512_BF16"

/// The bits of f rounded to bf16 as vcvtne2ps2bf16 rounds: nearest-even, NaN kept (quieted, payload truncated),
/// denormals flushed to zero with their sign.
inline uint16_t round_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) u |= 0x00400000u;
  else if ((u & 0x7F800000u) == 0) u &= 0x80000000u;
  else u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// f32 → bf16 → f32 by round_bf16_bits.
inline float round_bf16(float f) {
  const uint32_t u = static_cast<uint32_t>(round_bf16_bits(f)) << 16;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

struct Bf16Ref {
  std::vector<double> y, mag;  // Σ bf16(x)·w + b, and Σ |bf16(x)·w| + |b| (the scale of f32 summation error)
};

/// y[m, n] = Σ_k bf16(x[m, k]) · w[n, k] (+ b[n]) in double; w as exact values (M × K, N × K, row-major).
inline Bf16Ref bf16_reference(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* b,
                              int64_t M, int64_t N, int64_t K) {
  Bf16Ref r{std::vector<double>(M * N), std::vector<double>(M * N)};
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = b ? (*b)[n] : 0.0, a = std::abs(s);
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(round_bf16(x[m * K + k])) * double(w[n * K + k]);
        s += p, a += std::abs(p);
      }
      r.y[m * N + n] = s, r.mag[m * N + n] = a;
    }
  return r;
}

}  // namespace ferry::ops::optest
