// GGUF reading and validation (see include/ferry/io/gguf.h).
#include "ferry/io/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "ferry/core/error.h"
#include "ferry/core/mapped_file.h"
#include "ferry/core/storage.h"

namespace ferry::io {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxDims = 4;              // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 2;        // arrays of arrays are allowed once, deeper nesting is refused

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Smallest encoding of one value of a type (for sanity checks of counts against the bytes left).
uint64_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::Bool: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: case GgufValueType::String: return 8;
    case GgufValueType::Array: return 12;
  }
  return 1;
}

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::F64); }

class Cursor {
 public:
  Cursor(std::span<const uint8_t> b, const std::string& where) : b_(b), where_(where) {}

  [[noreturn]] void fail(const std::string& problem, const std::string& at = {},
                         const std::string& hint = "the file is damaged or not a GGUF model; download or convert it again") const {
    throw Error(problem, at.empty() ? where_ : where_ + ": " + at, hint);
  }
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return b_.size() - pos_; }
  void need(uint64_t n, const std::string& what, const std::string& at) const {
    if (n > left())
      fail("truncated: " + what + " needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
               ", only " + std::to_string(left()) + " left",
           at);
  }
  template <class T>
  T read(const std::string& what, const std::string& at) {
    need(sizeof(T), what, at);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const std::string& what, const std::string& at) {
    const uint64_t n = read<uint64_t>(what + " length", at);
    need(n, what, at);
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), static_cast<std::size_t>(n));
    pos_ += n;
    return s;
  }

 private:
  std::span<const uint8_t> b_;
  const std::string& where_;
  uint64_t pos_ = 0;
};

nlohmann::json read_value(Cursor& c, GgufValueType type, const std::string& key, int depth,
                          GgufValueType* element_type = nullptr) {
  switch (type) {
    case GgufValueType::U8: return c.read<uint8_t>("a u8", key);
    case GgufValueType::I8: return c.read<int8_t>("an i8", key);
    case GgufValueType::U16: return c.read<uint16_t>("a u16", key);
    case GgufValueType::I16: return c.read<int16_t>("an i16", key);
    case GgufValueType::U32: return c.read<uint32_t>("a u32", key);
    case GgufValueType::I32: return c.read<int32_t>("an i32", key);
    case GgufValueType::U64: return c.read<uint64_t>("a u64", key);
    case GgufValueType::I64: return c.read<int64_t>("an i64", key);
    case GgufValueType::F32: return c.read<float>("an f32", key);
    case GgufValueType::F64: return c.read<double>("an f64", key);
    case GgufValueType::Bool: {
      const uint8_t v = c.read<uint8_t>("a bool", key);
      if (v > 1) c.fail("bool value " + std::to_string(v) + " is neither 0 nor 1", key);
      return v == 1;
    }
    case GgufValueType::String: return c.string("a string", key);
    case GgufValueType::Array: {
      if (depth >= kMaxArrayDepth) c.fail("arrays nested deeper than " + std::to_string(kMaxArrayDepth), key);
      const uint32_t et = c.read<uint32_t>("the array element type", key);
      if (!known_value_type(et)) c.fail("unknown array element type " + std::to_string(et), key);
      const auto elem = static_cast<GgufValueType>(et);
      if (element_type) *element_type = elem;
      const uint64_t n = c.read<uint64_t>("the array length", key);
      if (n > c.left() / min_value_bytes(elem))
        c.fail("array of " + std::to_string(n) + " " + std::string(gguf_value_type_name(elem)) +
                   " values cannot fit in the " + std::to_string(c.left()) + " bytes left",
               key);
      nlohmann::json a = nlohmann::json::array();
      a.get_ref<nlohmann::json::array_t&>().reserve(static_cast<std::size_t>(n));
      for (uint64_t i = 0; i < n; ++i) a.push_back(read_value(c, elem, key, depth + 1));
      return a;
    }
  }
  c.fail("unknown value type", key);
}

std::optional<DType> plain_dtype(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return DType::F32;
    case GgmlType::F16: return DType::F16;
    case GgmlType::BF16: return DType::BF16;
    case GgmlType::F64: return DType::F64;
    case GgmlType::I8: return DType::I8;
    case GgmlType::I16: return DType::I16;
    case GgmlType::I32: return DType::I32;
    case GgmlType::I64: return DType::I64;
    default: return dtype_of_ggml(t);  // the quantized types ferry computes with (q8_0 ... q6_k)
  }
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType t) noexcept {
  static constexpr std::string_view names[] = {"u8",   "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                               "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < std::size(names) ? names[i] : std::string_view("unknown");
}

Shape GgufTensorInfo::shape() const {
  Shape s;
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) s.push_back(static_cast<int64_t>(*it));
  return s;
}

int64_t GgufTensorInfo::numel() const { return shape_numel(shape()); }

GgufTensorInfo GgufTensorInfo::slice(int64_t k) const {
  if (dims.size() < 2) throw Error("a 1-D tensor has no slices", name);
  const uint64_t n = dims.back();
  if (k < 0 || static_cast<uint64_t>(k) >= n)
    throw Error("slice " + std::to_string(k) + " is out of range (the tensor stacks " + std::to_string(n) + ")", name);
  // Blocks never straddle slices: each slice is whole rows of dims[0] elements (validated when the file was read).
  GgufTensorInfo s{name + "[" + std::to_string(k) + "]", {dims.begin(), dims.end() - 1}, type, 0, nbytes / n};
  s.offset = offset + static_cast<uint64_t>(k) * s.nbytes;
  return s;
}

GgufFile GgufFile::open(const std::filesystem::path& path) {
  auto file = MappedFile::open(path);
  GgufFile g = parse(std::span<const uint8_t>(file->data(), file->size()), path.string());
  g.file_ = std::move(file);
  return g;
}

GgufFile GgufFile::parse(std::span<const uint8_t> bytes, const std::string& where) {
  GgufFile g;
  g.where_ = where;
  g.bytes_ = bytes;
  Cursor c(bytes, g.where_);
  if (bytes.size() < 4) c.fail("not a GGUF file: " + std::to_string(bytes.size()) + " bytes, too short for the magic");
  const uint32_t magic = c.read<uint32_t>("the magic", "");
  if (magic != kMagic)
    c.fail("not a GGUF file: the magic is " + hex(magic) + ", not \"GGUF\"", "",
           "pass a .gguf file, or a Hugging Face folder (config.json + *.safetensors)");
  g.version_ = c.read<uint32_t>("the version", "");
  if (g.version_ == 1)
    c.fail("GGUF version 1 (32-bit counts) is not supported", "", "convert the model again with a current llama.cpp");
  if (g.version_ == 0x02000000 || g.version_ == 0x03000000)
    c.fail("big-endian GGUF is not supported", "", "use the little-endian file of this model");
  if (g.version_ != 2 && g.version_ != 3)
    c.fail("unknown GGUF version " + std::to_string(g.version_) + " (ferry reads 2 and 3)");
  const uint64_t n_tensors = c.read<uint64_t>("the tensor count", "");
  const uint64_t n_kv = c.read<uint64_t>("the metadata count", "");
  if (n_kv > c.left() / 13)  // key length + empty key + value type + one byte: 13 bytes at least
    c.fail(std::to_string(n_kv) + " metadata entries cannot fit in the " + std::to_string(c.left()) + " bytes left");

  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string at = "metadata entry " + std::to_string(i);
    std::string key = c.string("a key", at);
    const uint32_t t = c.read<uint32_t>("the value type", key);
    if (!known_value_type(t)) c.fail("unknown metadata value type " + std::to_string(t), key);
    GgufValue v{static_cast<GgufValueType>(t)};
    v.value = read_value(c, v.type, key, 0, &v.element_type);
    if (g.metadata_.count(key)) c.fail("duplicate metadata key", key);
    g.metadata_.emplace(std::move(key), std::move(v));
  }

  if (const GgufValue* a = g.find("general.alignment")) {
    if (a->type != GgufValueType::U32) c.fail("must be a u32, not " + std::string(gguf_value_type_name(a->type)), "general.alignment");
    const uint64_t al = a->value.get<uint64_t>();
    if (al == 0 || (al & (al - 1)) != 0) c.fail(std::to_string(al) + " is not a power of two", "general.alignment");
    g.alignment_ = al;
  }

  if (n_tensors > c.left() / 24)  // name length + n_dims + one dim + type + offset: 28 bytes at least
    c.fail(std::to_string(n_tensors) + " tensors cannot fit in the " + std::to_string(c.left()) + " bytes left");
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = c.string("a tensor name", "tensor " + std::to_string(i));
    const std::string& at = t.name;
    if (g.index_.count(t.name)) c.fail("duplicate tensor name", at);
    const uint32_t n_dims = c.read<uint32_t>("the dimension count", at);
    if (n_dims == 0 || n_dims > kMaxDims)
      c.fail(std::to_string(n_dims) + " dimensions (ggml tensors have 1 to " + std::to_string(kMaxDims) + ")", at);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = c.read<uint64_t>("a dimension", at);
      if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || (n != 0 && numel > UINT64_MAX / n))
        c.fail("dimensions overflow 64 bits", at);
      numel *= n;
      t.dims.push_back(n);
    }
    if (numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) c.fail("too many elements", at);
    const uint32_t type = c.read<uint32_t>("the tensor type", at);
    const auto info = ggml_type_info(type);
    if (!info) c.fail("unknown ggml type " + std::to_string(type), at, "this file needs a newer ferry (or llama.cpp)");
    t.type = info->type;
    if (t.dims[0] % static_cast<uint64_t>(info->block_size) != 0)
      c.fail("the innermost dimension " + std::to_string(t.dims[0]) + " is not a whole number of " +
                 std::string(info->name) + " blocks of " + std::to_string(info->block_size),
             at);
    const auto row = ggml_row_bytes(t.type, t.dims[0]);
    const uint64_t rows = t.dims[0] == 0 ? 0 : numel / t.dims[0];
    if (!row || (rows != 0 && *row > UINT64_MAX / rows)) c.fail("byte size overflows 64 bits", at);
    t.nbytes = *row * rows;
    t.offset = c.read<uint64_t>("the data offset", at);
    if (t.offset % g.alignment_ != 0)
      c.fail("data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                 std::to_string(g.alignment_),
             at);
    g.index_.emplace(t.name, g.tensors_.size());
    g.tensors_.push_back(std::move(t));
  }

  const uint64_t end_of_infos = c.pos();
  g.data_offset_ = (end_of_infos + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  if (!g.tensors_.empty() && g.data_offset_ > bytes.size())
    c.fail("truncated: the data section would start at offset " + std::to_string(g.data_offset_) + ", past the end (" +
           std::to_string(bytes.size()) + " bytes)");
  std::vector<const GgufTensorInfo*> by_offset;
  for (auto& t : g.tensors_) {
    const uint64_t room = bytes.size() - std::min<uint64_t>(g.data_offset_, bytes.size());
    if (t.offset > room || t.nbytes > room - t.offset)
      c.fail("the tensor's " + std::to_string(t.nbytes) + " bytes at data offset " + std::to_string(t.offset) +
                 " run past the end of the file (" + std::to_string(bytes.size()) + " bytes)",
             t.name, "the file is truncated: download it again");
    t.offset += g.data_offset_;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->nbytes > 0 && by_offset[i - 1]->offset + by_offset[i - 1]->nbytes > by_offset[i]->offset)
      c.fail("its data overlaps tensor " + by_offset[i]->name, by_offset[i - 1]->name);
  return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

namespace {
[[noreturn]] void wrong_type(const std::string& where, const std::string& key, const GgufValue& v, const char* want) {
  throw Error(std::string("must be ") + want + ", not " + std::string(gguf_value_type_name(v.type)), where + ": " + key,
              "the file's metadata is not what llama.cpp writes for this key");
}
}  // namespace

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::String) wrong_type(where_, key, *v, "a string");
  return v->value.get<std::string>();
}

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->value.is_number_integer()) wrong_type(where_, key, *v, "an integer");
  if (v->value.is_number_unsigned() && v->value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw Error("value does not fit in 64 signed bits", where_ + ": " + key);
  return v->value.get<int64_t>();
}

std::optional<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->value.is_number() || v->type == GgufValueType::Bool) wrong_type(where_, key, *v, "a number");
  return v->value.get<double>();
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::Bool) wrong_type(where_, key, *v, "a bool");
  return v->value.get<bool>();
}

std::string GgufFile::require_string(const std::string& key) const {
  auto v = get_string(key);
  if (!v) throw Error("missing metadata key", where_ + ": " + key, "the file lacks what llama.cpp writes for this model");
  return *v;
}

int64_t GgufFile::require_int(const std::string& key) const {
  auto v = get_int(key);
  if (!v) throw Error("missing metadata key", where_ + ": " + key, "the file lacks what llama.cpp writes for this model");
  return *v;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor_info(const std::string& name) const {
  if (const GgufTensorInfo* t = find_tensor(name)) return *t;
  throw Error("no tensor of this name", where_ + ": " + name, "is the file of the architecture its metadata names?");
}

std::span<const uint8_t> GgufFile::tensor_bytes(const GgufTensorInfo& t) const {
  return bytes_.subspan(static_cast<std::size_t>(t.offset), static_cast<std::size_t>(t.nbytes));
}

Tensor GgufFile::tensor(const std::string& name) const { return tensor(tensor_info(name)); }

Tensor GgufFile::tensor(const GgufTensorInfo& t) const {
  const std::string& name = t.name;
  if (!file_) throw Error("tensors of a GGUF parsed from memory have no mapping", where_ + ": " + name);
  if (const auto dt = plain_dtype(t.type))
    return Tensor::from_storage(Storage::view(file_, static_cast<std::size_t>(t.offset), static_cast<std::size_t>(t.nbytes)),
                                0, t.shape(), *dt);
  Tensor out = Tensor::empty(t.shape(), DType::F32);
  try {
    dequantize(t.type, tensor_bytes(t).data(), out.data<float>(), t.numel());
  } catch (const Error& e) {
    throw e.with_context(where_ + ": " + name);
  }
  return out;
}

}  // namespace ferry::io
