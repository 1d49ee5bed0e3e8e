// AVX2/F16C conversion kernels (convert_avx2.cc); call only when cpu_isa() >= Isa::AVX2.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::detail {
void f16_to_f32_avx2(const uint16_t* src, float* dst, std::size_t n) noexcept;
void f32_to_f16_avx2(const float* src, uint16_t* dst, std::size_t n) noexcept;
void bf16_to_f32_avx2(const uint16_t* src, float* dst, std::size_t n) noexcept;
void f32_to_bf16_avx2(const float* src, uint16_t* dst, std::size_t n) noexcept;
}  // namespace ferry::detail
