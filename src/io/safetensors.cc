// safetensors reader: header validation and zero-copy views of the mapping (see include/ferry/io/safetensors.h).
//
// Validation follows the reference implementation (huggingface/safetensors, Rust) and is stricter where it is
// silent: duplicate keys, unknown fields, empty names and trailing bytes are errors here.
#include "ferry/io/safetensors.h"

#include <algorithm>
#include <cstring>

#include "ferry/core/convert.h"
#include "ferry/core/error.h"
#include "ferry/core/mapped_file.h"
#include "io/json_strict.h"

namespace ferry::io {
namespace {

using detail::json_brief;
using detail::json_int;
using detail::json_nonneg_int;

std::string accepted_dtypes() {
  std::string s;
  for (DType t : kAllDTypes) s += (s.empty() ? "" : ", ") + std::string(safetensors_dtype_name(t));
  return s;
}

Shape parse_shape(const nlohmann::json& v, const std::string& where) {
  if (!v.is_array()) throw Error("\"shape\" must be a list of integers, got " + json_brief(v), where);
  Shape shape;
  shape.reserve(v.size());
  for (const auto& d : v) {
    auto i = json_int(d);
    if (!i) throw Error("\"shape\" must be a list of integers, got element " + json_brief(d), where);
    if (*i < 0) throw Error("negative dimension " + std::to_string(*i) + " in shape", where);
    shape.push_back(*i);
  }
  return shape;
}

// numel × element size, or an error when it does not fit in 64 bits.
std::size_t checked_nbytes(const Shape& shape, DType dtype, const std::string& where) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
      throw Error("shape " + shape_str(shape) + " overflows 64 bits when multiplied out", where);
  }
  return static_cast<std::size_t>(n);
}

SafetensorsEntry parse_entry(const std::string& name, const nlohmann::json& v, const std::string& where) {
  const std::string here = where + ": " + name;
  if (name.empty()) throw Error("tensor with an empty name", where);
  if (!v.is_object()) throw Error("tensor entry must be an object, got " + json_brief(v), here);
  for (const auto& [key, val] : v.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      throw Error("unknown field \"" + key + "\" in tensor entry", here,
                  "expected only \"dtype\", \"shape\" and \"data_offsets\"");
  }
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.contains(key)) throw Error(std::string("tensor entry lacks \"") + key + "\"", here);

  SafetensorsEntry e;
  e.name = name;
  const auto& dt = v["dtype"];
  if (!dt.is_string()) throw Error("\"dtype\" must be a string, got " + json_brief(dt), here);
  auto dtype = dtype_from_safetensors(dt.get<std::string>());
  if (!dtype)
    throw Error("unknown or unsupported dtype \"" + dt.get<std::string>() + "\"", here,
                "ferry reads " + accepted_dtypes());
  e.dtype = *dtype;
  e.shape = parse_shape(v["shape"], here);

  const auto& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    throw Error("\"data_offsets\" must be [begin, end], got " + json_brief(off), here);
  auto b = json_nonneg_int(off[0]), en = json_nonneg_int(off[1]);
  if (!b || !en)
    throw Error("\"data_offsets\" must be two non-negative integers, got " + json_brief(off), here);
  if (*b > *en)
    throw Error("\"data_offsets\" [" + std::to_string(*b) + ", " + std::to_string(*en) + "] are reversed", here);
  e.begin = static_cast<std::size_t>(*b);
  e.end = static_cast<std::size_t>(*en);

  const std::size_t need = checked_nbytes(e.shape, e.dtype, here);
  if (need != e.end - e.begin)
    throw Error("shape " + shape_str(e.shape) + " of " + std::string(safetensors_dtype_name(e.dtype)) + " needs " +
                    std::to_string(need) + " bytes, but data_offsets span " + std::to_string(e.end - e.begin),
                here);
  return e;
}

std::map<std::string, std::string> parse_metadata(const nlohmann::json& v, const std::string& where) {
  if (!v.is_object()) throw Error("__metadata__ must be an object of strings, got " + json_brief(v), where);
  std::map<std::string, std::string> out;
  for (const auto& [key, val] : v.items()) {
    if (!val.is_string())
      throw Error("__metadata__ value of \"" + key + "\" must be a string, got " + json_brief(val), where);
    out.emplace(key, val.get<std::string>());
  }
  return out;
}

// The tensors must tile the data section exactly: sorted by offset, starting at 0, no holes, no overlap, ending at
// the end of the file.
void check_layout(std::vector<SafetensorsEntry>& tensors, std::size_t data_size, const std::string& where) {
  for (const auto& e : tensors) {
    if (e.end > data_size)
      throw Error("data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                      "] run past the end of the data section (" + std::to_string(data_size) + " bytes)",
                  where + ": " + e.name, "the file is truncated or the header is corrupt");
  }
  std::stable_sort(tensors.begin(), tensors.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::size_t pos = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const auto& e : tensors) {
    if (e.begin < pos)
      throw Error("bytes [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + ") overlap tensor \"" +
                      prev->name + "\" [" + std::to_string(prev->begin) + ", " + std::to_string(prev->end) + ")",
                  where + ": " + e.name);
    if (e.begin > pos)
      throw Error("hole of " + std::to_string(e.begin - pos) + " unused bytes before this tensor (at data offset " +
                      std::to_string(pos) + ")",
                  where + ": " + e.name);
    pos = e.end;
    prev = &e;
  }
  if (pos != data_size)
    throw Error(std::to_string(data_size - pos) + " bytes after the last tensor are not described by the header",
                where, "the file is corrupt or was written by a broken tool");
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const uint8_t* data, std::size_t size, const std::string& where) {
  if (size < 8)
    throw Error("file of " + std::to_string(size) + " bytes is too small to be safetensors (needs at least 8)",
                where);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  if (n > kSafetensorsMaxHeader)
    throw Error("header length " + std::to_string(n) + " exceeds the " + std::to_string(kSafetensorsMaxHeader) +
                    "-byte limit",
                where, "this is not a safetensors file, or it is corrupt");
  if (n > size - 8)
    throw Error("header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) +
                    " bytes)",
                where, "the file is truncated or not safetensors");
  if (n < 2) throw Error("header of " + std::to_string(n) + " bytes is too short to be a JSON object", where);

  const std::string_view text(reinterpret_cast<const char*>(data + 8), static_cast<std::size_t>(n));
  nlohmann::json j = detail::parse_json_strict(text, where, "safetensors header");
  if (!j.is_object()) throw Error("safetensors header must be a JSON object, got " + json_brief(j), where);

  SafetensorsHeader h;
  h.data_start = 8 + static_cast<std::size_t>(n);
  h.tensors.reserve(j.size());
  for (const auto& [key, val] : j.items()) {
    if (key == "__metadata__")
      h.metadata = parse_metadata(val, where);
    else
      h.tensors.push_back(parse_entry(key, val, where));
  }
  check_layout(h.tensors, size - h.data_start, where);
  return h;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile f;
  f.file_ = MappedFile::open(path);
  auto header = std::make_shared<SafetensorsHeader>(
      parse_safetensors_header(f.file_->data(), f.file_->size(), path.string()));
  auto index = std::make_shared<std::unordered_map<std::string_view, std::size_t>>();
  index->reserve(header->tensors.size());
  for (std::size_t i = 0; i < header->tensors.size(); ++i) index->emplace(header->tensors[i].name, i);
  f.header_ = std::move(header);
  f.index_ = std::move(index);
  return f;
}

const std::filesystem::path& SafetensorsFile::path() const noexcept { return file_->path(); }

std::vector<std::string> SafetensorsFile::keys() const {
  std::vector<std::string> out;
  out.reserve(header_->tensors.size());
  for (const auto& e : header_->tensors) out.push_back(e.name);
  return out;
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  auto it = index_->find(name);
  return it == index_->end() ? nullptr : &header_->tensors[it->second];
}

Tensor SafetensorsFile::get(std::string_view name) const {
  const SafetensorsEntry* e = find(name);
  if (!e) throw Error("no tensor of this name in the file", path().string() + ": " + std::string(name));
  const std::size_t offset = header_->data_start + e->begin;
  Tensor view = Tensor::from_storage(Storage::view(file_, offset, e->end - e->begin), 0, e->shape, e->dtype);
  // Files written by safetensors and by ferry align every tensor to its element size. A hand-made file may not;
  // typed kernels must not see a misaligned pointer, so such a tensor is copied once.
  const auto addr = reinterpret_cast<std::uintptr_t>(file_->data() + offset);
  if (e->end > e->begin && addr % dtype_size(e->dtype) != 0) return view.clone();
  return view;
}

// A conversion reads every byte at once. Asking the kernel for the tensor's whole range (plus what follows it in the
// file, which loaders read next) lets disk reads run ahead of the converting threads instead of one fault-sized
// readahead window at a time. Pages already cached cost nothing.
constexpr std::size_t kReadAhead = 32u << 20;

Tensor SafetensorsFile::get(std::string_view name, DType dtype) const {
  Tensor view = get(name);
  if (view.dtype() == dtype) return view;
  file_->prefetch(header_->data_start + find(name)->begin, view.nbytes() + kReadAhead);
  return view.to(dtype);
}

bool SafetensorsFile::prefetch(std::string_view name) const noexcept {
  const SafetensorsEntry* e = find(name);
  return e && file_->populate(header_->data_start + e->begin, e->end - e->begin);
}

void SafetensorsFile::read_into(std::string_view name, Tensor& dst) const {
  const Tensor src = get(name);
  const std::string where = path().string() + ": " + std::string(name);
  if (!dst.defined() || dst.is_meta() || dst.read_only())
    throw Error("destination tensor is not writable memory", where);
  if (dst.shape() != src.shape())
    throw Error("destination has shape " + shape_str(dst.shape()) + ", the file has " + shape_str(src.shape()), where);
  if (!dst.device().is_host_addressable()) {
    dst.copy_from(src);
    return;
  }
  file_->prefetch(header_->data_start + find(name)->begin, src.nbytes() + kReadAhead);
  if (src.numel() > 0)
    convert(src.raw_data(), src.dtype(), dst.raw_data(), dst.dtype(), static_cast<std::size_t>(src.numel()));
}

StateDict SafetensorsFile::load(std::optional<DType> dtype) const {
  StateDict out;
  for (const auto& e : header_->tensors)
    out.insert(e.name, dtype && is_floating_point(e.dtype) ? get(e.name, *dtype) : get(e.name));
  return out;
}

StateDict load_safetensors(const std::filesystem::path& path, std::optional<DType> dtype) {
  return SafetensorsFile::open(path).load(dtype);
}

}  // namespace ferry::io
