// DType: the element types ferry stores and computes with, their sizes and their names in the formats we read.
//
// Names: safetensors spells them F32, F16, BF16, F8_E4M3, F8_E5M2, F64, I8, U8, I16, I32, I64, BOOL;
// Accelerate's offload index (numpy-style) spells them float32, float16, bfloat16, float8_e4m3fn, float8_e5m2,
// float64, int8, uint8, int16, int32, int64, bool; PyTorch's torch.float16 etc. parse too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ferry {

enum class DType : uint8_t { F32, F16, BF16, F8_E4M3FN, F8_E5M2, F64, I8, U8, I16, I32, I64, Bool };

inline constexpr DType kAllDTypes[] = {DType::F32, DType::F16,  DType::BF16, DType::F8_E4M3FN,
                                       DType::F8_E5M2, DType::F64, DType::I8, DType::U8,
                                       DType::I16, DType::I32, DType::I64, DType::Bool};

/// Bytes one element occupies in memory and in files (bool: 1).
std::size_t dtype_size(DType t) noexcept;

/// Bytes one element counts for in size planning. Accelerate: dtype_byte_size (bool counts 1/8).
double dtype_byte_size(DType t) noexcept;

bool is_floating_point(DType t) noexcept;
bool is_fp8(DType t) noexcept;

/// Short name used in ferry's own output and flags: "f32", "bf16", "f8_e4m3fn", "i64", "bool".
std::string_view dtype_name(DType t) noexcept;
/// safetensors header name: "F32", "BF16", "F8_E4M3", ...
std::string_view safetensors_dtype_name(DType t) noexcept;
/// Accelerate offload-index / numpy name: "float32", "bfloat16", "int64", ...
std::string_view numpy_dtype_name(DType t) noexcept;

std::optional<DType> dtype_from_safetensors(std::string_view name) noexcept;
std::optional<DType> dtype_from_numpy(std::string_view name) noexcept;

/// Parses any of the spellings above plus "half", "float", "torch.bfloat16", "fp16", "bfloat16" ...;
/// throws ferry::Error listing the accepted names for anything else.
DType parse_dtype(std::string_view name);

}  // namespace ferry
