// Block-quantized weight formats as llama.cpp's ggml defines them (ggml.h `enum ggml_type`, ggml-common.h block
// structs), and their dequantization to f32, bit-exact with ggml's dequantize_row_* and the `gguf` Python
// package's dequantize.
//
// A quantized tensor is a sequence of blocks; each block holds `block_size` consecutive elements of a row (the
// innermost dimension) as small integers plus one or two f16 scales:
//
//   type   elements  bytes  layout                                                     value
//   Q4_0   32        18     d f16, qs[16] (low nibbles: elements 0..15, high: 16..31)  d·(q − 8)
//   Q4_1   32        20     d, m f16, qs[16]                                           d·q + m
//   Q5_0   32        22     d f16, qh u32 (bit i: 5th bit of element i), qs[16]        d·(q − 16)
//   Q5_1   32        24     d, m f16, qh u32, qs[16]                                   d·q + m
//   Q8_0   32        34     d f16, qs[32] int8                                         d·q
//   Q4_K   256       144    d, dmin f16, 8 × (6-bit scale, 6-bit min) in 12 bytes, qs[128]   (d·sc)·q − dmin·m
//   Q5_K   256       176    as Q4_K plus qh[32] (bit j of qh[l]: 5th bit in sub-block j)      (d·sc)·q − dmin·m
//   Q6_K   256       210    ql[128], qh[64], scales[16] int8, d f16                    (d·sc)·(q − 32)
//
// Other ggml types are known by name and size (so a GGUF file holding them is described, and refused with their
// name) but not dequantized.
//
// Quantization (f32 -> blocks): Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 follow ggml's reference quantizers
// (quantize_row_*_ref) bit for bit. For Q4_K, Q5_K and Q6_K ferry has its own quantizer: per sub-block the
// least-squares scale (and min) over the rounded levels, refined a few times, then the sub-block scales quantized
// against the super-block scale. It writes the same block layout, so llama.cpp reads it; llama.cpp's own
// quantizer searches harder and reaches a slightly lower error on the same weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "ferry/core/dtype.h"

namespace ferry {

/// ggml's type numbers (stable across llama.cpp versions: they are written into GGUF files).
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;    ///< llama.cpp's spelling: "q4_K", "f16", ...
  int64_t block_size;       ///< elements per block (1 for plain types)
  std::size_t block_bytes;  ///< bytes per block
  bool dequantizable;       ///< dequantize() supports it
};

/// The type with number `id`, or nullopt for a number ggml does not define (or removed: 4, 5, 31..33).
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) noexcept;
GgmlTypeInfo ggml_type_info(GgmlType type) noexcept;

/// Bytes of `n` elements of `type`; nullopt when n is not a whole number of blocks or the size overflows.
std::optional<uint64_t> ggml_row_bytes(GgmlType type, uint64_t n) noexcept;

/// Dequantizes `n` elements (a whole number of blocks) of `type` at `src` into `dst`, bit-exactly as ggml.
/// Supports F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K; throws ferry::Error for the others
/// (naming the type) and for n not a multiple of the block size.
void dequantize(GgmlType type, const void* src, float* dst, int64_t n);

/// Q4_K / Q5_K: the 6-bit scale `sc` and min `m` of sub-block j (0..7) from a block's 12 packed scale bytes `q`.
void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) noexcept;

/// Quantizes `n` elements (a whole number of blocks) of `src` into `dst` as `type`. Supports Q8_0, Q4_0, Q4_1,
/// Q5_0, Q5_1, Q4_K, Q5_K, Q6_K (and F32, F16, BF16 as plain conversions); throws ferry::Error for the others.
void quantize(GgmlType type, const float* src, void* dst, int64_t n);

/// The ggml type that stores DType `t` (f32, f16, bf16 and the quantized DTypes), or nullopt.
std::optional<GgmlType> ggml_type_of(DType t) noexcept;
/// The DType of ggml type `t` when ferry has one (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k).
std::optional<DType> dtype_of_ggml(GgmlType t) noexcept;

}  // namespace ferry
