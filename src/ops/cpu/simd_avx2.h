// AVX2/FMA/F16C building blocks shared by the *_avx2.cc kernels: 8-wide loads of every float dtype as f32,
// horizontal sums, and the vector exp / sigmoid / erf-GELU the activations, softmax and attention use.
// Include only from *_avx2.cc files (the only ones compiled with -mavx2 -mfma -mf16c).
//
// Accuracy: exp256 is Cephes' expf scheme (Cody-Waite reduction by ln 2, degree-6 polynomial; about 1 ulp),
// returning 0 below ln(FLT_MIN) and +inf above ln(FLT_MAX). gelu_erf256 uses the Chebyshev fit of erfc from
// Numerical Recipes (§6.2, fractional error < 1.2e-7) so that 0.5·(1 + erf(z)) is computed without
// cancellation on both sides of zero.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "simd_avx2.h is for *_avx2.cc translation units only"
#endif

#include <immintrin.h>

#include <cstdint>

#include "ferry/core/dtype.h"

// Fully unrolls the short loop that follows (over rows, keys or lanes held in arrays of vectors). Without it GCC
// -O2 keeps such arrays on the stack and every FMA goes through a store and a reload.
#define FERRY_UNROLL _Pragma("GCC unroll 16")

namespace ferry::ops::cpu::avx2 {

/// 8 elements of dtype T starting at element i, as f32. fp8 goes through f16: an e5m2 byte is the top byte of the
/// f16 with the same value; an e4m3fn byte shifted into f16 position is its value · 2⁻⁸ (normal and subnormal
/// alike, the exponent biases differ by 8), so one multiply by 256 restores it; the e4m3fn NaN pattern (0x7F)
/// would land on a finite f16, so it gets the f16 exponent all-ones first.
template <DType T>
inline __m256 load8(const void* base, int64_t i) {
  if constexpr (T == DType::F32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + i);
  } else if constexpr (T == DType::F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i)));
  } else if constexpr (T == DType::BF16) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else if constexpr (T == DType::F8_E5M2) {
    __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(base) + i));
    return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(b), 8));
  } else if constexpr (T == DType::F8_E4M3FN) {
    __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(base) + i));
    __m128i v = _mm_cvtepu8_epi16(b);
    __m128i mag = _mm_and_si128(v, _mm_set1_epi16(0x7F));
    __m128i h = _mm_or_si128(_mm_slli_epi16(mag, 7), _mm_slli_epi16(_mm_and_si128(v, _mm_set1_epi16(0x80)), 8));
    __m128i nan = _mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7F));
    h = _mm_or_si128(h, _mm_and_si128(nan, _mm_set1_epi16(0x7C00)));
    return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
  } else {
    static_assert(T == DType::F32, "load8: no 8-wide load for this dtype");
  }
}

/// 16 fp8 elements starting at element i as two 8-lane f32 vectors, for the memory-bound GEMV, where the 8-wide
/// load8 above runs out of instruction throughput before memory does. e4m3fn values come out scaled by 2⁻⁸
/// (fp8_scale<T>() restores them; exact, a power of two): sign-extending the byte puts the sign in both top bits
/// after the shift by 7, and masking bit 14 leaves the f16 pattern.
template <DType T>
inline void load16_fp8(const void* base, int64_t i, __m256& lo, __m256& hi) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(base) + i));
  __m256i h;
  if constexpr (T == DType::F8_E5M2) {
    h = _mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 8);
  } else {
    static_assert(T == DType::F8_E4M3FN, "load16_fp8: fp8 dtypes only");
    h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7), _mm256_set1_epi16(static_cast<short>(0xBF80)));
    const __m256i mag = _mm256_set1_epi16(0x3F80);
    const __m256i nan = _mm256_cmpeq_epi16(_mm256_and_si256(h, mag), mag);
    h = _mm256_or_si256(h, _mm256_and_si256(nan, _mm256_set1_epi16(0x7C00)));
  }
  lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
  hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}

template <DType T>
constexpr float fp8_scale() {
  return T == DType::F8_E4M3FN ? 256.0f : 1.0f;
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// Mask of the first n lanes (0 <= n <= 8), for maskload/maskstore tails.
inline __m256i tail_mask(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
}

inline __m256 exp256(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-87.3365478515625f);
  __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  __m256 y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));  // NaN stays NaN
}

/// x · sigmoid(x) = x / (1 + e^-x); exp256's saturation gives -0 for very negative x, x for large x.
inline __m256 silu256(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(x, _mm256_add_ps(one, exp256(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

/// 0.5·x·(1 + tanh(u)) with u = √(2/π)(x + 0.044715 x³), written as x / (1 + e^(-2u)) (the same function:
/// 0.5(1 + tanh u) = sigmoid(2u)), which has no cancellation for negative x.
inline __m256 gelu_tanh256(__m256 x) {
  const __m256 k = _mm256_set1_ps(-2.0f * 0.7978845608028654f);
  __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  __m256 u = _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x);
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp256(_mm256_mul_ps(k, u))));
}

/// 0.5·x·(1 + erf(x/√2)) = x·(1 − erfc(z)/2) for x ≥ 0 and x·erfc(z)/2 for x < 0, z = |x|/√2.
/// erfc(z) = t·exp(−z² + P(t)), t = 1/(1 + z/2); z² is split into a rounded part and its exact remainder
/// (one FMA) so its rounding error does not reach the exponent.
inline __m256 gelu_erf256(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));  // rounded like torch's x * M_SQRT1_2
  z = _mm256_min_ps(_mm256_andnot_ps(sign, z), _mm256_set1_ps(10.0f));  // erfc(10) < 1e-44: 0 in f32
  __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(half, z, one));
  __m256 p = _mm256_set1_ps(0.17087277f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.82215223f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.48851587f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.13520398f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.27886807f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.18628806f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.09678418f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.37409196f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.00002368f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.26551223f));
  __m256 zz = _mm256_mul_ps(z, z);
  __m256 zz_lo = _mm256_fmsub_ps(z, z, zz);  // z·z − zz, exactly
  __m256 e = _mm256_mul_ps(exp256(_mm256_sub_ps(p, zz)), _mm256_sub_ps(one, zz_lo));
  __m256 half_erfc = _mm256_mul_ps(half, _mm256_mul_ps(t, e));
  __m256 pos = _mm256_sub_ps(one, half_erfc);
  __m256 factor = _mm256_blendv_ps(pos, half_erfc, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
  return _mm256_mul_ps(x, factor);
}

}  // namespace ferry::ops::cpu::avx2
