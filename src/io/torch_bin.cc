// PyTorch .bin (torch.save zip) loader: libzip for the archive, the restricted unpickler for data.pkl, zero-copy
// views for stored entries (see include/ferry/io/torch_bin.h).
#include "ferry/io/torch_bin.h"

#include <zip.h>

#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <unordered_map>

#include "ferry/core/error.h"
#include "ferry/core/mapped_file.h"
#include "io/torch_pickle.h"
#include "io/zip_directory.h"

namespace ferry::io {
namespace {

using detail::PickledStateDict;
using detail::PickledStorage;
using detail::PickledTensor;
using detail::ZipEntry;

// libzip over the mapped bytes (no second open of the file). ZIP_CHECKCONS compares local headers with the
// central directory, which our own directory reader also does for the entries it hands out zero-copy.
class ZipArchive {
 public:
  ZipArchive(const MappedFile& file, const std::string& where) {
    zip_error_t err;
    zip_error_init(&err);
    zip_source_t* src = zip_source_buffer_create(file.data(), file.size(), 0, &err);
    if (src) {
      za_ = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err);
      if (!za_) zip_source_free(src);
    }
    if (!za_) {
      std::string msg = zip_error_strerror(&err);
      zip_error_fini(&err);
      throw Error("cannot open zip archive: " + msg, where, "the file is truncated or corrupt");
    }
    zip_error_fini(&err);
  }
  ~ZipArchive() { zip_discard(za_); }
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;

  // Cross-checks libzip's view of each entry with the directory we parsed ourselves.
  void check_matches(const std::vector<ZipEntry>& entries, const std::string& where) const {
    const zip_int64_t n = zip_get_num_entries(za_, 0);
    if (n < 0 || static_cast<std::size_t>(n) != entries.size())
      throw Error("zip directory is inconsistent (entry count)", where, "the file is corrupt");
    for (std::size_t i = 0; i < entries.size(); ++i) {
      zip_stat_t st;
      if (zip_stat_index(za_, i, ZIP_FL_ENC_RAW, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
          entries[i].name != st.name || st.size != entries[i].size || st.comp_size != entries[i].compressed_size ||
          st.comp_method != entries[i].method)
        throw Error("zip directory is inconsistent", where + ": " + entries[i].name, "the file is corrupt");
    }
  }

  // Inflates (or copies) entry `index` of `size` bytes into `out`; libzip checks the CRC at the end.
  void read(std::size_t index, void* out, std::size_t size, const std::string& where) const {
    zip_file_t* f = zip_fopen_index(za_, index, 0);
    if (!f) throw Error(std::string("cannot read zip entry: ") + zip_strerror(za_), where);
    std::size_t got = 0;
    while (got < size) {
      const zip_int64_t r = zip_fread(f, static_cast<char*>(out) + got, size - got);
      if (r <= 0) {
        std::string msg = r < 0 ? zip_file_strerror(f) : "entry is shorter than its declared size";
        zip_fclose(f);
        throw Error("cannot read zip entry: " + msg, where, "the file is corrupt");
      }
      got += static_cast<std::size_t>(r);
    }
    char extra;
    const zip_int64_t tail = zip_fread(f, &extra, 1);  // reaching the end makes libzip verify the CRC
    const std::string msg = tail < 0 ? zip_file_strerror(f) : "";
    zip_fclose(f);
    if (tail != 0) throw Error("zip entry is corrupt" + (msg.empty() ? "" : ": " + msg), where);
  }

 private:
  zip_t* za_ = nullptr;
};

struct Archive {
  std::shared_ptr<const MappedFile> file;
  std::vector<ZipEntry> entries;
  std::unordered_map<std::string, std::size_t> by_name;
  std::string prefix;  // "archive" in "archive/data.pkl"
};

void check_magic(const MappedFile& f, const std::string& where) {
  const uint8_t* d = f.data();
  if (f.size() >= 4 && d[0] == 'P' && d[1] == 'K' && (d[2] == 3 || d[2] == 5)) return;
  if (f.size() >= 2 && d[0] == 0x80 && d[1] <= 5)
    throw Error("this is the legacy (pre-1.6) torch.save format, which ferry does not read", where,
                "load it with torch>=1.6 and save it again (torch.save(sd, path)) or convert it to safetensors");
  throw Error("not a PyTorch checkpoint (a torch.save zip archive)", where);
}

std::string find_prefix(const std::vector<ZipEntry>& entries, const std::string& where) {
  std::string prefix;
  int found = 0;
  for (const auto& e : entries) {
    const auto slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      prefix = e.name.substr(0, slash);
      ++found;
    }
  }
  if (found == 0) {
    for (const auto& e : entries)
      if (e.name.size() >= 13 && e.name.compare(e.name.size() - 13, 13, "constants.pkl") == 0)
        throw Error("this is a TorchScript archive (torch.jit.save), not a state dict", where,
                    "save model.state_dict() with torch.save, or use safetensors");
    throw Error("zip archive has no <name>/data.pkl: not a torch.save checkpoint", where);
  }
  if (found > 1) throw Error("zip archive holds " + std::to_string(found) + " data.pkl files", where);
  return prefix;
}

// The bytes of one zip entry: a view of the mapping when stored, owned memory when compressed.
std::shared_ptr<Storage> entry_bytes(const Archive& a, const ZipArchive& zip, std::size_t index,
                                     const std::string& where) {
  const ZipEntry& e = a.entries[index];
  if (e.flags & 1) throw Error("zip entry is encrypted", where + ": " + e.name);
  if (e.method == 0) return Storage::view(a.file, e.data_offset, e.size);
  // Deflate expands at most ~1032:1; a larger claim is a zip bomb or corruption.
  if (e.size / 1100 > e.compressed_size + 1024)
    throw Error("zip entry claims " + std::to_string(e.size) + " bytes from " + std::to_string(e.compressed_size) +
                    " compressed",
                where + ": " + e.name, "the file is corrupt");
  auto s = Storage::allocate(Device::cpu(), e.size);
  if (e.size) zip.read(index, s->data(), e.size, where + ": " + e.name);
  return s;
}

void check_byteorder(const Archive& a, const ZipArchive& zip, const std::string& where) {
  auto it = a.by_name.find(a.prefix + "/byteorder");
  if (it == a.by_name.end()) return;  // written since PyTorch 1.12; older files are little-endian
  const ZipEntry& e = a.entries[it->second];
  if (e.size > 16) throw Error("byteorder record is too long", where);
  std::string s(e.size, '\0');
  zip.read(it->second, s.data(), s.size(), where);
  if (s == "big") throw Error("big-endian checkpoints are not supported", where, "re-save it on a little-endian machine");
  if (s != "little") throw Error("byteorder record says \"" + s + "\"", where);
}

bool is_contiguous(const Shape& size, const std::vector<int64_t>& stride) {
  int64_t expected = 1;
  for (std::size_t i = size.size(); i-- > 0;) {
    if (size[i] != 1 && stride[i] != expected) return false;
    expected *= size[i];
  }
  return true;
}

// Copies a strided view into a new contiguous tensor (rows at a time when the last dimension is dense).
Tensor materialise(const uint8_t* base, const PickledTensor& t) {
  Tensor out = Tensor::empty(t.size, t.dtype, Device::cpu());
  if (out.numel() == 0) return out;
  const std::size_t es = dtype_size(t.dtype), nd = t.size.size();
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  if (nd == 0) {
    std::memcpy(dst, base + t.offset * es, es);
    return out;
  }
  const int64_t inner = t.size[nd - 1], inner_stride = t.stride[nd - 1];
  std::vector<int64_t> idx(nd - 1, 0);
  for (;;) {
    int64_t src = t.offset;
    for (std::size_t d = 0; d + 1 < nd; ++d) src += idx[d] * t.stride[d];
    if (inner_stride == 1) {
      std::memcpy(dst, base + src * es, static_cast<std::size_t>(inner) * es);
      dst += inner * es;
    } else {
      for (int64_t k = 0; k < inner; ++k, dst += es) std::memcpy(dst, base + (src + k * inner_stride) * es, es);
    }
    std::size_t d = nd - 1;
    while (d > 0 && ++idx[d - 1] == t.size[d - 1]) idx[--d] = 0;
    if (d == 0) break;
  }
  return out;
}

Tensor build_tensor(const PickledTensor& t, const std::shared_ptr<Storage>& bytes, const std::string& where) {
  const std::string here = where + ": " + t.name;
  if (t.size.size() != t.stride.size())
    throw Error("tensor has " + std::to_string(t.size.size()) + " sizes but " + std::to_string(t.stride.size()) +
                    " strides",
                here);
  if (t.offset < 0) throw Error("negative storage offset", here);
  int64_t numel = 1, last = t.offset;
  for (std::size_t i = 0; i < t.size.size(); ++i) {
    if (t.size[i] < 0) throw Error("negative dimension in shape " + shape_str(t.size), here);
    if (t.stride[i] < 0) throw Error("negative stride", here);
    if (__builtin_mul_overflow(numel, t.size[i], &numel)) throw Error("shape " + shape_str(t.size) + " overflows", here);
  }
  const std::size_t es = dtype_size(t.dtype);
  const int64_t storage_elems = static_cast<int64_t>(bytes->nbytes() / es);
  if (numel == 0) return Tensor::empty(t.size, t.dtype, Device::cpu());
  for (std::size_t i = 0; i < t.size.size(); ++i) {
    int64_t reach;
    if (__builtin_mul_overflow(t.size[i] - 1, t.stride[i], &reach) || __builtin_add_overflow(last, reach, &last))
      throw Error("tensor view overflows", here);
  }
  if (last >= storage_elems)
    throw Error("tensor " + shape_str(t.size) + " at offset " + std::to_string(t.offset) + " reaches element " +
                    std::to_string(last) + " of a storage of " + std::to_string(storage_elems),
                here, "the file is corrupt");
  if (is_contiguous(t.size, t.stride))
    return Tensor::from_storage(bytes, static_cast<std::size_t>(t.offset) * es, t.size, t.dtype);
  return materialise(static_cast<const uint8_t*>(bytes->data()), t);
}

}  // namespace

bool looks_like_zip(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char m[4] = {};
  in.read(m, 4);
  return in.gcount() == 4 && m[0] == 'P' && m[1] == 'K' && (m[2] == 3 || m[2] == 5);
}

StateDict load_torch_bin(const std::filesystem::path& path, std::optional<DType> dtype) {
  const std::string where = path.string();
  Archive a;
  a.file = MappedFile::open(path);
  check_magic(*a.file, where);
  a.entries = detail::read_zip_directory(a.file->data(), a.file->size(), where);
  for (std::size_t i = 0; i < a.entries.size(); ++i)
    if (!a.by_name.emplace(a.entries[i].name, i).second)
      throw Error("zip archive holds two entries named \"" + a.entries[i].name + "\"", where);
  ZipArchive zip(*a.file, where);
  zip.check_matches(a.entries, where);
  a.prefix = find_prefix(a.entries, where);
  check_byteorder(a, zip, where);

  const std::size_t pkl = a.by_name.at(a.prefix + "/data.pkl");
  if (a.entries[pkl].size > detail::kMaxPickleBytes)
    throw Error("data.pkl is larger than the " + std::to_string(detail::kMaxPickleBytes) + "-byte limit", where);
  auto pkl_bytes = entry_bytes(a, zip, pkl, where);
  const PickledStateDict sd = detail::unpickle_state_dict(static_cast<const uint8_t*>(pkl_bytes->data()),
                                                          pkl_bytes->nbytes(), where + ": data.pkl");

  // One byte storage per key, shared by every tensor that views it (tied weights stay tied).
  std::unordered_map<std::string, std::shared_ptr<Storage>> storage_by_key;
  std::vector<std::shared_ptr<Storage>> storages;
  for (const PickledStorage& s : sd.storages) {
    const std::string name = a.prefix + "/data/" + s.key;
    auto it = a.by_name.find(name);
    if (it == a.by_name.end())
      throw Error("storage \"" + s.key + "\" named by data.pkl is missing from the archive", where,
                  "the file is truncated or corrupt");
    uint64_t want;
    if (__builtin_mul_overflow(static_cast<uint64_t>(s.numel), dtype_size(s.dtype), &want) ||
        want != a.entries[it->second].size)
      throw Error("storage \"" + s.key + "\" should hold " + std::to_string(s.numel) + " elements of " +
                      std::string(dtype_name(s.dtype)) + " but its entry has " +
                      std::to_string(a.entries[it->second].size) + " bytes",
                  where, "the file is corrupt");
    auto& bytes = storage_by_key[s.key];
    if (!bytes) {
      bytes = entry_bytes(a, zip, it->second, where);
      // torch.save aligns storages to 64 bytes; an archive re-zipped by other tools may not. Typed kernels must
      // not see misaligned pointers, so such a storage is copied once (its views still share the copy).
      if (reinterpret_cast<std::uintptr_t>(bytes->data()) % 8 != 0) {
        auto copy = Storage::allocate(Device::cpu(), bytes->nbytes());
        std::memcpy(copy->data(), bytes->data(), bytes->nbytes());
        bytes = std::move(copy);
      }
    }
    storages.push_back(bytes);
  }

  StateDict out;
  // (storage, byte offset) -> (loaded, converted): names that shared bytes still share them after a cast.
  std::map<std::pair<const Storage*, std::size_t>, std::vector<std::pair<Tensor, Tensor>>> converted;
  for (const PickledTensor& t : sd.tensors) {
    Tensor tensor = build_tensor(t, storages[t.storage], where);
    if (dtype && is_floating_point(tensor.dtype()) && tensor.dtype() != *dtype) {
      auto& seen = converted[{tensor.storage().get(), tensor.byte_offset()}];
      Tensor cast;
      for (const auto& [from, to] : seen)
        if (from.is_same(tensor)) cast = to;
      if (!cast.defined()) {
        cast = tensor.to(*dtype);
        seen.emplace_back(tensor, cast);
      }
      tensor = cast;
    }
    out.insert(t.name, std::move(tensor));
  }
  return out;
}

}  // namespace ferry::io
