// GGUF: llama.cpp's model file (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md), read with mmap and
// validated like safetensors.
//
// Layout (little-endian): magic "GGUF", u32 version (2 or 3), u64 tensor count, u64 metadata count; the metadata
// key/value pairs (key: u64 length + UTF-8 bytes; u32 value type; the value — arrays are u32 element type, u64
// count, elements); the tensor infos (name, u32 n_dims ≤ 4, u64 dims innermost first, u32 ggml type, u64 offset
// into the data section); padding to `general.alignment` (default 32); the data section.
//
// Files are untrusted: everything above is checked before a tensor is handed out — lengths and counts against the
// bytes left, value and tensor types, nesting, duplicate keys and names, alignment (a power of two; every offset a
// multiple of it), dims (a whole number of blocks, no overflow), each tensor inside the file — and every failure is
// a ferry::Error naming the file, the key or tensor, and the problem.
//
// Tensors are described in ggml's order (dims[0] innermost) and in torch's (shape(): reversed). f32, f16 and bf16
// tensors come out as zero-copy Tensors of the mapping, quantized ones too (as quantized DTypes, core/dtype.h);
// tensor_bytes gives any tensor's raw blocks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/core/quant.h"
#include "ferry/core/tensor.h"

namespace ferry {
class MappedFile;
}

namespace ferry::io {

/// GGUF metadata value types (gguf.md `gguf_metadata_value_type`).
enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9, U64 = 10, I64 = 11,
  F64 = 12,
};

/// One metadata value: its GGUF type (for arrays also the element type) and the value as JSON (numbers, booleans,
/// strings, arrays of them; arrays of arrays nest).
struct GgufValue {
  GgufValueType type;
  GgufValueType element_type = GgufValueType::U8;  ///< arrays only
  nlohmann::json value;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  ///< ggml order: dims[0] is the innermost (contiguous) dimension
  GgmlType type;
  uint64_t offset = 0;         ///< absolute offset in the file
  uint64_t nbytes = 0;
  /// torch order: dims reversed ([out_features, in_features] for a linear weight).
  Shape shape() const;
  int64_t numel() const;
  /// The k-th slice along the outermost dimension (torch's dim 0), as a tensor of its own: one expert of llama.cpp's
  /// stacked `ffn_{gate,up,down}_exps` ([E, out, in]). Named "<name>[k]", its bytes a contiguous part of this
  /// tensor's. Throws ferry::Error naming the tensor for a 1-D tensor or k out of range.
  GgufTensorInfo slice(int64_t k) const;
};

class GgufFile {
 public:
  /// Maps and validates `path`. Throws ferry::Error naming the file on any problem.
  static GgufFile open(const std::filesystem::path& path);
  /// Validates a GGUF image in memory (the fuzz target and tests); `where` names it in errors. Tensors of a file
  /// parsed this way have no mapping: tensor() is unavailable, tensor_bytes() views `bytes`.
  static GgufFile parse(std::span<const uint8_t> bytes, const std::string& where);

  uint32_t version() const noexcept { return version_; }
  uint64_t alignment() const noexcept { return alignment_; }
  uint64_t data_offset() const noexcept { return data_offset_; }
  const std::string& where() const noexcept { return where_; }

  const std::map<std::string, GgufValue>& metadata() const noexcept { return metadata_; }
  /// The value of `key`, or nullptr.
  const GgufValue* find(const std::string& key) const;
  /// Typed metadata getters; throw ferry::Error naming the key when it is absent (require_*) or of another type.
  std::optional<std::string> get_string(const std::string& key) const;
  std::optional<int64_t> get_int(const std::string& key) const;    ///< any integer type
  std::optional<double> get_float(const std::string& key) const;   ///< f32/f64 (and integers)
  std::optional<bool> get_bool(const std::string& key) const;
  std::string require_string(const std::string& key) const;
  int64_t require_int(const std::string& key) const;

  /// Tensor infos in file order.
  const std::vector<GgufTensorInfo>& tensors() const noexcept { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  const GgufTensorInfo& tensor_info(const std::string& name) const;  ///< throws naming the tensor when absent
  /// The raw bytes of a tensor (blocks for quantized types).
  std::span<const uint8_t> tensor_bytes(const GgufTensorInfo& t) const;
  /// A zero-copy view (torch shape) for plain types and for the quantized types ferry has a DType for (q8_0, q4_0,
  /// q4_1, q5_0, q5_1, q4_k, q5_k, q6_k: their blocks, as they are in the file). Throws for other types (naming
  /// them) and for files made with parse().
  Tensor tensor(const std::string& name) const;
  /// The same for a tensor info of this file or a slice() of one.
  Tensor tensor(const GgufTensorInfo& info) const;

 private:
  std::shared_ptr<const MappedFile> file_;
  std::span<const uint8_t> bytes_;
  std::string where_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, std::size_t> index_;
};

/// Every GGUF value type name for messages: "u32", "string", "array", ...
std::string_view gguf_value_type_name(GgufValueType t) noexcept;

}  // namespace ferry::io
