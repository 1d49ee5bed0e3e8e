// AVX2 quantized GEMV (the kernels live in quant_simd.h, shared with AVX-512) and the AVX2 quantization of the
// activations, which gives the same bytes as scalar::quantize_x (same float operations, round to nearest even).
#include <immintrin.h>

#define FERRY_QUANT_NS avx2
#define FERRY_QUANT_VNNI 0
#define FERRY_QUANT_MAX_ROWS 4
#include "quant_simd.h"

namespace ferry::ops::cpu::avx2 {
namespace {

inline int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// The largest |x| of n (a multiple of 8) floats.
inline float absmax(const float* p, int n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 mx = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) mx = _mm256_max_ps(mx, _mm256_and_ps(_mm256_loadu_ps(p + i), abs_mask));
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// 32 values times id, rounded to nearest even, into q as int8; sums[h] = Σ of levels 16h .. 16h + 15.
inline void round32(const float* p, float id, int8_t* q, int sums[2]) {
  const __m256 idv = _mm256_set1_ps(id);
  __m256i v[4];
  for (int i = 0; i < 4; ++i)
    v[i] = _mm256_cvtps_epi32(
        _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(p + 8 * i), idv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  sums[0] = hsum_epi32(_mm256_add_epi32(v[0], v[1]));
  sums[1] = hsum_epi32(_mm256_add_epi32(v[2], v[3]));
  // packs interleave the 128-bit lanes; the permutation puts the 32 bytes back in order.
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

}  // namespace

void quantize_x(const float* x, int64_t K, QBlock8* out) {
  for (int64_t g = 0; g < K / 32; ++g) {
    const float* p = x + 32 * g;
    const float d = absmax(p, 32) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    QBlock8& b = out[g];
    int sums[2];
    round32(p, id, b.q, sums);
    b.d = d;
    b.dsum[0] = d * static_cast<float>(sums[0]), b.dsum[1] = d * static_cast<float>(sums[1]);
    b.dsum_all = b.dsum[0] + b.dsum[1];
  }
}

void quantize_x_k(const float* x, int64_t K, QBlockK* out) {
  for (int64_t g = 0; g < K / 256; ++g) {
    const float* p = x + 256 * g;
    const float d = absmax(p, 256) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    QBlockK& b = out[g];
    b.d = d;
    for (int c = 0; c < 8; ++c) {
      int sums[2];
      round32(p + 32 * c, id, b.q + 32 * c, sums);
      b.bsum[2 * c] = static_cast<int16_t>(sums[0]), b.bsum[2 * c + 1] = static_cast<int16_t>(sums[1]);
    }
  }
}

}  // namespace ferry::ops::cpu::avx2
