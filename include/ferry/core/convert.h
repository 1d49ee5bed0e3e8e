// Exact element conversions between every DType.
//
// Floating-point targets round to nearest, ties to even, from the exact source value (one rounding, never
// double rounding: f64 -> f16 does not pass through f32). Subnormals are kept. NaN stays NaN (quiet, sign kept).
// Overflow follows PyTorch's (non-saturating) casts:
//   f16, bf16, f32, f8_e5m2  -> ±inf
//   f8_e4m3fn (no inf)       -> NaN   (so does ±inf; finite range is ±448)
// `saturate = true` instead clamps finite overflow and ±inf to ±max finite (the OCP fp8 "satfinite" mode) for
// fp8 targets. Float -> integer truncates toward zero and clamps to the target's range (NaN -> 0); -> bool is
// value != 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/core/dtype.h"

namespace ferry {

/// Converts n elements. src and dst must not overlap unless src == dst and the types have the same size.
/// Large conversions run on the thread pool; f16/bf16 <-> f32 use F16C/AVX2 when available.
void convert(const void* src, DType src_type, void* dst, DType dst_type, std::size_t n, bool saturate = false);

// Scalar building blocks (exact; the reference for the vectorised paths).
float f16_to_f32(uint16_t h) noexcept;
float bf16_to_f32(uint16_t b) noexcept;
float f8_e4m3fn_to_f32(uint8_t v) noexcept;
float f8_e5m2_to_f32(uint8_t v) noexcept;
uint16_t f32_to_f16(float f) noexcept;
uint16_t f32_to_bf16(float f) noexcept;
uint8_t f32_to_f8_e4m3fn(float f, bool saturate = false) noexcept;
uint8_t f32_to_f8_e5m2(float f, bool saturate = false) noexcept;

/// Any float DType's bits from a double, rounded once (RNE). `t` must be floating point.
uint64_t encode_float(double x, DType t, bool saturate = false) noexcept;
/// The exact value of float DType `t` with the given bits.
double decode_float(uint64_t bits, DType t) noexcept;

}  // namespace ferry
