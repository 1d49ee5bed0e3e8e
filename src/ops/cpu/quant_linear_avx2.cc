// AVX2 quantized GEMV (the kernels live in quant_simd.h, shared with AVX-512) and the AVX2 quantization of the
// activations, which gives the same bytes as scalar::quantize_x (same float operations, round to nearest even).
#include <immintrin.h>

#define FERRY_QUANT_NS avx2
#define FERRY_QUANT_VNNI 0
#include "quant_simd.h"

namespace ferry::ops::cpu::avx2 {
namespace {

inline int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void quantize_x(const float* x, int64_t K, QBlock8* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t g = 0; g < K / 32; ++g) {
    const float* p = x + 32 * g;
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(p + 8 * i);
    __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                              _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float amax = _mm_cvtss_f32(m);
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    __m256i q[4];
    for (int i = 0; i < 4; ++i)
      q[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], idv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    QBlock8& b = out[g];
    b.d = d;
    b.dsum[0] = d * static_cast<float>(hsum_epi32(_mm256_add_epi32(q[0], q[1])));
    b.dsum[1] = d * static_cast<float>(hsum_epi32(_mm256_add_epi32(q[2], q[3])));
    b.dsum_all = b.dsum[0] + b.dsum[1];
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.q), _mm256_permutevar8x32_epi32(bytes, order));
  }
}

void quantize_x_k(const float* x, int64_t K, QBlockK* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t g = 0; g < K / 256; ++g) {
    const float* p = x + 256 * g;
    __m256 mx = _mm256_setzero_ps();
    for (int i = 0; i < 32; ++i) mx = _mm256_max_ps(mx, _mm256_and_ps(_mm256_loadu_ps(p + 8 * i), abs_mask));
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float amax = _mm_cvtss_f32(m);
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    QBlockK& b = out[g];
    b.d = d;
    for (int c = 0; c < 8; ++c) {  // 32 values at a time
      __m256i q[4];
      for (int i = 0; i < 4; ++i)
        q[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(p + 32 * c + 8 * i), idv),
                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      b.bsum[2 * c] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[0], q[1])));
      b.bsum[2 * c + 1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[2], q[3])));
      const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.q + 32 * c), _mm256_permutevar8x32_epi32(bytes, order));
    }
  }
}

}  // namespace ferry::ops::cpu::avx2
