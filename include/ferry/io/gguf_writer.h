// Writing GGUF v3 files (llama.cpp's format; io/gguf.h reads them): metadata key/values in the order they were set,
// tensor infos, then the tensors' bytes, each aligned to general.alignment (32). Written atomically (a temporary
// file renamed into place). llama.cpp: gguf-py's GGUFWriter / gguf_write_to_file.
//
//   io::GgufWriter w;
//   w.set("general.architecture", io::gguf_string("llama"));
//   w.add_tensor("token_embd.weight", embed.to(DType::Q8_0));   // torch shape; dims are written innermost first
//   w.write("model.gguf");
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ferry/core/tensor.h"
#include "ferry/io/gguf.h"

namespace ferry::io {

GgufValue gguf_string(std::string s);
GgufValue gguf_u32(uint32_t v);
GgufValue gguf_i32(int32_t v);
GgufValue gguf_f32(float v);
GgufValue gguf_bool(bool v);
/// An array of `element_type` values (numbers, booleans or strings as JSON).
GgufValue gguf_array(GgufValueType element_type, nlohmann::json values);

class GgufWriter {
 public:
  /// Sets metadata `key` (replacing an earlier value of the same key, keeping its place).
  void set(const std::string& key, GgufValue value);
  /// Adds a tensor of a dtype GGUF stores (f32, f16, bf16, i8 ... i64, f64 and the quantized DTypes), on the host.
  /// Throws ferry::Error naming the tensor for a duplicate name or a dtype GGUF has no type for.
  void add_tensor(const std::string& name, const Tensor& t);
  /// Adds a tensor made only while the file is written (so a whole model never sits in memory): `make` must return
  /// a host tensor of `shape` and `dtype`.
  void add_tensor(const std::string& name, Shape shape, DType dtype, std::function<Tensor()> make);
  /// Writes the file. Throws ferry::Error naming `path` when it cannot be written.
  void write(const std::filesystem::path& path) const;

 private:
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  struct Entry {
    std::string name;
    Shape shape;
    DType dtype;
    std::function<Tensor()> make;
  };
  std::vector<Entry> tensors_;
};

}  // namespace ferry::io
