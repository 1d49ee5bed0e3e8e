// Unpacking block-quantized weight levels into 32 bytes with AVX2 instructions, shared by the quantized GEMV
// (quant_simd.h) and the quantized GEMM's weight packing (quant_gemm_avx512.cc, quant_gemm_avx2.cc). Internal
// linkage only: the translation units that include this are built for different ISAs, and none may hand its copy to
// another.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace ferry::ops::cpu {
namespace {

inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// 16 bytes of packed nibbles -> 32 bytes: the low nibbles, then the high ones (q4_0/q4_1/q5 element order).
inline __m256i nibbles16(const uint8_t* p) {
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
}

// Byte i = 0x10 where bit i % 8 of byte i of v is set: v holds each byte of a bit mask eight times in a row (a
// vpshufb spread), so byte i stands for bit i of the mask.
inline __m256i spread_bits_to_0x10(__m256i v) {
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(0x10));
}

// Byte i = 0x10 where bit i of qh is set (the 5th bit of q5 levels).
inline __m256i fifth_bits(uint32_t qh) {
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                        3, 3, 3, 3, 3, 3);
  return spread_bits_to_0x10(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), shuf));
}

}  // namespace
}  // namespace ferry::ops::cpu
