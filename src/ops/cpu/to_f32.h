// Conversion of weight, cache and parameter elements of any float dtype (f32, f16, bf16, f8_e4m3fn, f8_e5m2,
// f64) to f32, in runs. The kernels call these on rows or blocks as they stream them, so a weight is never
// materialised in f32 as a whole. The scalar versions are exact (core/convert.h, fp8 through 256-entry tables);
// the AVX2 versions give bit-identical results (F16C for f16; fp8 through the f16 tricks in to_f32_avx2.cc).
#pragma once

#include <cstdint>

#include "ferry/core/dtype.h"

namespace ferry::ops::cpu {

/// The 256 f32 values of an fp8 dtype (f8_e4m3fn or f8_e5m2), indexed by the byte.
const float* fp8_table(DType t) noexcept;

/// dst[i] = value of src element i, i < n. t is a float dtype.
void to_f32_scalar(DType t, const void* src, float* dst, int64_t n) noexcept;
void to_f32_avx2(DType t, const void* src, float* dst, int64_t n) noexcept;

/// The element at index i of a float array of dtype t (scalar; for tails and references).
float load_f32(DType t, const void* src, int64_t i) noexcept;

}  // namespace ferry::ops::cpu
