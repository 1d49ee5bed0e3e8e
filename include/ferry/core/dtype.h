// DType: the element types ferry stores and computes with, their sizes and their names in the formats we read.
//
// Names: safetensors spells them F32, F16, BF16, F8_E4M3, F8_E5M2, F64, I8, U8, I16, I32, I64, BOOL;
// Accelerate's offload index (numpy-style) spells them float32, float16, bfloat16, float8_e4m3fn, float8_e5m2,
// float64, int8, uint8, int16, int32, int64, bool; PyTorch's torch.float16 etc. parse too.
//
// Block-quantized types (Q8_0 ... Q6_K, llama.cpp's ggml formats, see core/quant.h) hold a row as blocks of 32 or
// 256 elements; a tensor of one has a last dimension that is a whole number of blocks and is never indexed by
// element: dtype_nbytes gives its size, the ops read it block by block. No safetensors name exists for them; their
// ferry name ("q4_k") is also what ferry's own offload index records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ferry {

enum class DType : uint8_t {
  F32, F16, BF16, F8_E4M3FN, F8_E5M2, F64, I8, U8, I16, I32, I64, Bool,
  Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K,  // block-quantized (ggml)
};

inline constexpr DType kAllDTypes[] = {DType::F32, DType::F16,  DType::BF16, DType::F8_E4M3FN,
                                       DType::F8_E5M2, DType::F64, DType::I8, DType::U8,
                                       DType::I16, DType::I32, DType::I64, DType::Bool};
inline constexpr DType kQuantizedDTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                             DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};

/// Bytes one element occupies in memory and in files (bool: 1); for a quantized type, bytes of one block.
std::size_t dtype_size(DType t) noexcept;
/// Elements per block: 32 or 256 for quantized types, 1 for the others.
int64_t dtype_block_size(DType t) noexcept;
/// Bytes of `numel` elements (numel a whole number of blocks for quantized types; the tail block counts whole).
std::size_t dtype_nbytes(DType t, int64_t numel) noexcept;

/// Bytes one element counts for in size planning. Accelerate: dtype_byte_size (bool counts 1/8; q4_0 18/32).
double dtype_byte_size(DType t) noexcept;

/// True for f32, f16, bf16, fp8 and f64 (not for the quantized types).
bool is_floating_point(DType t) noexcept;
bool is_fp8(DType t) noexcept;
bool is_quantized(DType t) noexcept;

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
