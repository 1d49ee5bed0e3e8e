// Scalar element conversion to f32 (see to_f32.h): the reference the AVX2 version is tested against.
#include "to_f32.h"

#include <array>
#include <cstring>

#include "ferry/core/convert.h"

namespace ferry::ops::cpu {
namespace {

template <float (*Decode)(uint8_t) noexcept>
std::array<float, 256> make_table() {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = Decode(static_cast<uint8_t>(i));
  return t;
}

}  // namespace

const float* fp8_table(DType t) noexcept {
  static const std::array<float, 256> e4m3 = make_table<f8_e4m3fn_to_f32>();
  static const std::array<float, 256> e5m2 = make_table<f8_e5m2_to_f32>();
  return t == DType::F8_E5M2 ? e5m2.data() : e4m3.data();
}

float load_f32(DType t, const void* src, int64_t i) noexcept {
  switch (t) {
    case DType::F32: return static_cast<const float*>(src)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(src)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
    case DType::F8_E4M3FN:
    case DType::F8_E5M2: return fp8_table(t)[static_cast<const uint8_t*>(src)[i]];
    case DType::F64: return static_cast<float>(static_cast<const double*>(src)[i]);
    default: return 0.0f;  // callers check for float dtypes at the op boundary
  }
}

void to_f32_scalar(DType t, const void* src, float* dst, int64_t n) noexcept {
  switch (t) {
    case DType::F32: std::memmove(dst, src, static_cast<std::size_t>(n) * sizeof(float)); return;
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::F8_E4M3FN:
    case DType::F8_E5M2: {
      const float* table = fp8_table(t);
      const auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = table[s[i]];
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = load_f32(t, src, i);
  }
}

}  // namespace ferry::ops::cpu
