// GGUF writer (see include/ferry/io/gguf_writer.h). Layout as gguf.h describes it: header, metadata, tensor infos,
// padding to the alignment, tensor data (each tensor padded to the alignment).
#include "ferry/io/gguf_writer.h"

#include <cstring>

#include "atomic_file.h"
#include "ferry/core/error.h"

namespace ferry::io {
namespace {

constexpr uint64_t kAlignment = 32;

class Bytes {
 public:
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) {
    while (out_.size() % alignment) out_.push_back(0);
  }
  const std::vector<uint8_t>& bytes() const { return out_; }

 private:
  std::vector<uint8_t> out_;
};

void put_scalar(Bytes& b, GgufValueType t, const nlohmann::json& v, const std::string& key) {
  switch (t) {
    case GgufValueType::U8: return b.put<uint8_t>(v.get<uint8_t>());
    case GgufValueType::I8: return b.put<int8_t>(v.get<int8_t>());
    case GgufValueType::U16: return b.put<uint16_t>(v.get<uint16_t>());
    case GgufValueType::I16: return b.put<int16_t>(v.get<int16_t>());
    case GgufValueType::U32: return b.put<uint32_t>(v.get<uint32_t>());
    case GgufValueType::I32: return b.put<int32_t>(v.get<int32_t>());
    case GgufValueType::F32: return b.put<float>(v.get<float>());
    case GgufValueType::Bool: return b.put<uint8_t>(v.get<bool>() ? 1 : 0);
    case GgufValueType::String: return b.put_string(v.get<std::string>());
    case GgufValueType::U64: return b.put<uint64_t>(v.get<uint64_t>());
    case GgufValueType::I64: return b.put<int64_t>(v.get<int64_t>());
    case GgufValueType::F64: return b.put<double>(v.get<double>());
    case GgufValueType::Array: break;
  }
  throw Error("nested arrays are not written", key);
}

}  // namespace

GgufValue gguf_string(std::string s) { return {GgufValueType::String, GgufValueType::U8, std::move(s)}; }
GgufValue gguf_u32(uint32_t v) { return {GgufValueType::U32, GgufValueType::U8, v}; }
GgufValue gguf_i32(int32_t v) { return {GgufValueType::I32, GgufValueType::U8, v}; }
GgufValue gguf_f32(float v) { return {GgufValueType::F32, GgufValueType::U8, v}; }
GgufValue gguf_bool(bool v) { return {GgufValueType::Bool, GgufValueType::U8, v}; }
GgufValue gguf_array(GgufValueType element_type, nlohmann::json values) {
  return {GgufValueType::Array, element_type, std::move(values)};
}

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : metadata_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, const Tensor& t) {
  if (!t.defined() || t.is_meta()) throw Error("tensor has no data to write", name);
  const Tensor host = t.device().is_host_addressable() ? t : t.to(Device::cpu());
  add_tensor(name, host.shape(), host.dtype(), [host] { return host; });
}

void GgufWriter::add_tensor(const std::string& name, Shape shape, DType dtype, std::function<Tensor()> make) {
  for (const auto& e : tensors_)
    if (e.name == name) throw Error("tensor added twice", name);
  const bool known = ggml_type_of(dtype).has_value() || dtype == DType::F64 || dtype == DType::I8 ||
                     dtype == DType::I16 || dtype == DType::I32 || dtype == DType::I64;
  if (!known)
    throw Error("GGUF has no type for " + std::string(dtype_name(dtype)), name,
                "convert it to f32, f16, bf16 or a quantized type first");
  tensors_.push_back({name, std::move(shape), dtype, std::move(make)});
}

void GgufWriter::write(const std::filesystem::path& path) const {
  auto ggml_of = [](DType d) -> GgmlType {
    if (auto g = ggml_type_of(d)) return *g;
    switch (d) {
      case DType::F64: return GgmlType::F64;
      case DType::I8: return GgmlType::I8;
      case DType::I16: return GgmlType::I16;
      case DType::I32: return GgmlType::I32;
      default: return GgmlType::I64;
    }
  };
  Bytes head;
  head.put<uint32_t>(0x46554747);  // "GGUF" little-endian
  head.put<uint32_t>(3);
  head.put<uint64_t>(tensors_.size());
  head.put<uint64_t>(metadata_.size());
  for (const auto& [key, v] : metadata_) {
    head.put_string(key);
    head.put<uint32_t>(static_cast<uint32_t>(v.type));
    if (v.type == GgufValueType::Array) {
      head.put<uint32_t>(static_cast<uint32_t>(v.element_type));
      head.put<uint64_t>(v.value.size());
      for (const auto& e : v.value) put_scalar(head, v.element_type, e, key);
    } else {
      put_scalar(head, v.type, v.value, key);
    }
  }
  uint64_t offset = 0;
  for (const auto& e : tensors_) {
    head.put_string(e.name);
    head.put<uint32_t>(static_cast<uint32_t>(e.shape.size()));
    for (auto d = e.shape.rbegin(); d != e.shape.rend(); ++d) head.put<uint64_t>(static_cast<uint64_t>(*d));
    head.put<uint32_t>(static_cast<uint32_t>(ggml_of(e.dtype)));
    head.put<uint64_t>(offset);
    offset += (dtype_nbytes(e.dtype, shape_numel(e.shape)) + kAlignment - 1) / kAlignment * kAlignment;
  }
  head.pad_to(kAlignment);
  detail::AtomicFile out(path);
  out.write(head.bytes().data(), head.bytes().size());
  static const uint8_t zeros[kAlignment] = {};
  for (const auto& e : tensors_) {
    Tensor t = e.make();
    if (t.shape() != e.shape || t.dtype() != e.dtype)
      throw Error("made " + t.str() + " where " + std::string(dtype_name(e.dtype)) + " " + shape_str(e.shape) +
                      " was announced",
                  path.string() + ": " + e.name);
    if (!t.device().is_host_addressable()) t = t.to(Device::cpu());
    out.write(t.raw_data(), t.nbytes());
    if (t.nbytes() % kAlignment) out.write(zeros, kAlignment - t.nbytes() % kAlignment);
  }
  out.commit(/*durable=*/false);
}

}  // namespace ferry::io
