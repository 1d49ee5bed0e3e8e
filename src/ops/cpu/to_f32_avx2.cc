// AVX2/F16C element conversion to f32 (see to_f32.h); bit-identical to the scalar version.
#include <cstring>

#include "simd_avx2.h"
#include "to_f32.h"

namespace ferry::ops::cpu {
namespace {

template <DType T>
void convert_run(const void* src, float* dst, int64_t n) noexcept {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, avx2::load8<T>(src, i));
  for (; i < n; ++i) dst[i] = load_f32(T, src, i);
}

}  // namespace

void to_f32_avx2(DType t, const void* src, float* dst, int64_t n) noexcept {
  switch (t) {
    case DType::F32: std::memmove(dst, src, static_cast<std::size_t>(n) * sizeof(float)); return;
    case DType::F16: convert_run<DType::F16>(src, dst, n); return;
    case DType::BF16: convert_run<DType::BF16>(src, dst, n); return;
    case DType::F8_E4M3FN: convert_run<DType::F8_E4M3FN>(src, dst, n); return;
    case DType::F8_E5M2: convert_run<DType::F8_E5M2>(src, dst, n); return;
    default: to_f32_scalar(t, src, dst, n);
  }
}

}  // namespace ferry::ops::cpu
