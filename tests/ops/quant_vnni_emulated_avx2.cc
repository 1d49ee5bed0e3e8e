// The AVX-512 VNNI quantized GEMV's code (quant_simd.h with FERRY_QUANT_VNNI 1 and 8 activation rows per call, what
// quant_linear_avx512.cc compiles) built for AVX2, with its two VNNI instructions emulated from their definitions:
// CPUs without AVX-512 then still test that path's loops, layouts and row handling (quant_vnni_emulated_test.cc);
// only the instructions themselves need the real CPU (quant_linear_test.cc runs them there).
#include <immintrin.h>

namespace {

// vpdpbusd: per 32-bit lane, src + Σ of the 4 products of unsigned bytes of a and signed bytes of b (no saturation).
inline __m256i emulated_dpbusd(__m256i src, __m256i a, __m256i b) {
  const __m256i a_even = _mm256_and_si256(a, _mm256_set1_epi16(0x00FF)), a_odd = _mm256_srli_epi16(a, 8);
  const __m256i b_even = _mm256_srai_epi16(_mm256_slli_epi16(b, 8), 8), b_odd = _mm256_srai_epi16(b, 8);
  return _mm256_add_epi32(src, _mm256_add_epi32(_mm256_madd_epi16(a_even, b_even), _mm256_madd_epi16(a_odd, b_odd)));
}

// vpdpwssd: per 32-bit lane, src + Σ of the 2 products of signed 16-bit elements (no saturation).
inline __m256i emulated_dpwssd(__m256i src, __m256i a, __m256i b) {
  return _mm256_add_epi32(src, _mm256_madd_epi16(a, b));
}

}  // namespace

#undef _mm256_dpbusd_epi32
#undef _mm256_dpwssd_epi32
#define _mm256_dpbusd_epi32 emulated_dpbusd
#define _mm256_dpwssd_epi32 emulated_dpwssd
#define FERRY_QUANT_NS vnni_emulated
#define FERRY_QUANT_VNNI 1
#define FERRY_QUANT_MAX_ROWS 8
#include "ops/cpu/quant_simd.h"
