// Offload folder reading and writing in Accelerate's format (see include/ferry/io/offload.h).
#include "ferry/io/offload.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "ferry/core/error.h"
#include "ferry/core/mapped_file.h"
#include "ferry/io/checkpoint.h"
#include "io/atomic_file.h"
#include "io/json_strict.h"

namespace fs = std::filesystem;

namespace ferry::io {
namespace {

constexpr std::size_t kMaxIndexBytes = 256u << 20;

void check_weight_name(const std::string& name, const std::string& where) {
  if (!is_plain_file_name(name + ".dat") || name.empty())
    throw Error("weight name \"" + name + "\" cannot be stored as \"<name>.dat\" inside the offload folder", where,
                "names may not be empty or contain '/', '\\\\' or NUL");
}

std::optional<DType> parse_index_dtype(const std::string& s) {
  if (auto d = dtype_from_numpy(s)) return d;
  try {
    return parse_dtype(s);  // also "torch.float16", "half", ...
  } catch (const Error&) {
    return std::nullopt;
  }
}

OffloadEntry parse_entry(const std::string& name, const nlohmann::json& v, const std::string& where) {
  const std::string here = where + ": " + name;
  if (!v.is_object()) throw Error("index entry must be an object, got " + detail::json_brief(v), here);
  OffloadEntry e;
  if (v.contains("dtype")) {
    if (!v["dtype"].is_string()) throw Error("\"dtype\" must be a string", here);
    e.dtype = parse_index_dtype(v["dtype"].get<std::string>());
    if (!e.dtype) throw Error("unknown dtype \"" + v["dtype"].get<std::string>() + "\"", here);
  }
  if (v.contains("safetensors_file")) {
    if (!v["safetensors_file"].is_string() || v["safetensors_file"].get<std::string>().empty())
      throw Error("\"safetensors_file\" must be a non-empty path", here);
    e.safetensors_file = v["safetensors_file"].get<std::string>();
    if (v.contains("weight_name")) {
      if (!v["weight_name"].is_string()) throw Error("\"weight_name\" must be a string", here);
      e.weight_name = v["weight_name"].get<std::string>();
    }
    return e;
  }
  if (v.contains("data_file")) {
    if (!v["data_file"].is_string() || v["data_file"].get<std::string>().empty())
      throw Error("\"data_file\" must be a non-empty path", here);
    e.data_file = v["data_file"].get<std::string>();
    const auto off = v.contains("data_offset") ? detail::json_nonneg_int(v["data_offset"]) : std::nullopt;
    if (!off) throw Error("a \"data_file\" entry needs a non-negative integer \"data_offset\"", here);
    e.data_offset = static_cast<uint64_t>(*off);
  } else {
    check_weight_name(name, where);
  }
  if (!e.dtype) throw Error("index entry lacks \"dtype\"", here);
  if (!v.contains("shape") || !v["shape"].is_array()) throw Error("index entry lacks a \"shape\" list", here);
  Shape shape;
  for (const auto& d : v["shape"]) {
    auto n = detail::json_nonneg_int(d);
    if (!n) throw Error("\"shape\" must hold non-negative integers, got " + detail::json_brief(d), here);
    shape.push_back(*n);
  }
  uint64_t bytes = dtype_size(*e.dtype);
  for (int64_t d : shape)
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
      throw Error("shape " + shape_str(shape) + " overflows 64 bits", here);
  e.shape = std::move(shape);
  return e;
}

nlohmann::json entry_json(const OffloadEntry& e) {
  nlohmann::json j = nlohmann::json::object();
  if (e.in_safetensors()) {
    j["safetensors_file"] = e.safetensors_file;
    if (!e.weight_name.empty()) j["weight_name"] = e.weight_name;
    if (e.dtype) j["dtype"] = numpy_dtype_name(*e.dtype);
    return j;
  }
  if (e.in_data_file()) {
    j["data_file"] = e.data_file;
    j["data_offset"] = e.data_offset;
  }
  j["dtype"] = numpy_dtype_name(e.dtype.value_or(DType::F32));
  j["shape"] = e.shape.value_or(Shape{});
  return j;
}

// Holds an exclusive flock on "<folder>/.index.json.lock" so concurrent savers merge instead of racing.
class FolderLock {
 public:
  explicit FolderLock(const fs::path& folder) {
    const fs::path p = folder / ".index.json.lock";
    fd_ = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error("cannot create lock file", p.string(), "check that the offload folder is writable");
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~FolderLock() { ::close(fd_); }
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

void offload_weight(const Tensor& weight, const std::string& weight_name, const fs::path& offload_folder,
                    OffloadIndex& index) {
  offload_weight(weight, weight_name, offload_folder);
  index[weight_name] = OffloadEntry{.dtype = weight.dtype(), .shape = weight.shape()};
}

void offload_weight(const Tensor& weight, const std::string& weight_name, const fs::path& offload_folder) {
  const fs::path file = offload_folder / (weight_name + ".dat");
  check_weight_name(weight_name, offload_folder.string());
  if (!weight.defined() || weight.is_meta())
    throw Error("cannot offload a tensor without data", file.string(), "load its weights before offloading");
  const Tensor host = weight.device().is_host_addressable() ? weight : weight.to(Device::cpu());
  detail::AtomicFile out(file);
  if (host.nbytes() > 0) out.write(host.raw_data(), host.nbytes());
  out.commit(/*durable=*/true);  // data must be on disk before any index names it
}

OffloadIndex parse_offload_index(std::string_view json, const std::string& where) {
  const nlohmann::json j = detail::parse_json_strict(json, where, "offload index");
  if (!j.is_object()) throw Error("offload index must be a JSON object", where);
  OffloadIndex out;
  for (const auto& [name, v] : j.items()) out.emplace(name, parse_entry(name, v, where));
  return out;
}

OffloadIndex load_offload_index(const fs::path& offload_folder) {
  const fs::path p = offload_folder / "index.json";
  std::error_code ec;
  if (!fs::exists(p, ec))
    throw Error(ErrorKind::NotFound, "offload folder has no index.json", offload_folder.string(),
                "was it written by offload_weight + save_offload_index (or Accelerate)?");
  return parse_offload_index(detail::read_small_file(p, kMaxIndexBytes), p.string());
}

void save_offload_index(const OffloadIndex& index, const fs::path& offload_folder) {
  if (index.empty()) return;
  const fs::path p = offload_folder / "index.json";
  FolderLock lock(offload_folder);
  // Merge at the JSON level so fields of existing entries that ferry does not model survive untouched; parse it
  // fully first so a corrupt index is reported instead of silently replaced.
  nlohmann::json merged = nlohmann::json::object();
  std::error_code ec;
  if (fs::exists(p, ec)) {
    const std::string text = detail::read_small_file(p, kMaxIndexBytes);
    parse_offload_index(text, p.string());
    merged = nlohmann::json::parse(text);
  }
  for (const auto& [name, entry] : index) merged[name] = entry_json(entry);
  detail::AtomicFile out(p);
  out.write(merged.dump(2));
  out.commit(/*durable=*/true);
}

void offload_state_dict(const fs::path& save_dir, const StateDict& state_dict) {
  std::error_code ec;
  fs::create_directories(save_dir, ec);
  if (ec) throw Error("cannot create folder: " + ec.message(), save_dir.string());
  OffloadIndex index;
  for (const auto& [name, tensor] : state_dict) offload_weight(tensor, name, save_dir, index);
  save_offload_index(index, save_dir);
}

Tensor load_offloaded_weight(const fs::path& weight_file, const OffloadEntry& info) {
  if (!info.dtype || !info.shape)
    throw Error("offload entry lacks a dtype or shape", weight_file.string());
  const DType dtype = *info.dtype;
  const Shape& shape = *info.shape;
  auto file = MappedFile::open(weight_file);
  // 0-d tensors are stored as one element (numpy memmaps cannot be 0-d).
  const std::size_t want = dtype_nbytes(dtype, shape_numel(shape));
  if (file->size() != want)
    throw Error("file holds " + std::to_string(file->size()) + " bytes, but the index says " + shape_str(shape) +
                    " " + std::string(numpy_dtype_name(dtype)) + " (" + std::to_string(want) + " bytes)",
                weight_file.string(), "the offload folder is incomplete or corrupt; offload the weights again");
  return Tensor::from_storage(Storage::view(std::move(file), 0, want), 0, shape, dtype);
}

}  // namespace ferry::io
