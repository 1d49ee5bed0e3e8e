// Writes torch.save-style .bin files for tests (see torch_bin_writer.h).
#include "support/torch_bin_writer.h"

#include <zip.h>

#include <array>
#include <fstream>
#include <map>
#include <stdexcept>

namespace ferry::testing {
namespace {

void le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint32_t crc32(std::string_view data) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

const char* storage_class(DType t) {
  switch (t) {
    case DType::F32: return "FloatStorage";
    case DType::F16: return "HalfStorage";
    case DType::BF16: return "BFloat16Storage";
    case DType::F64: return "DoubleStorage";
    case DType::I64: return "LongStorage";
    case DType::I32: return "IntStorage";
    case DType::I16: return "ShortStorage";
    case DType::I8: return "CharStorage";
    case DType::U8: return "ByteStorage";
    case DType::Bool: return "BoolStorage";
    default: return nullptr;  // fp8: UntypedStorage + _rebuild_tensor_v3
  }
}

// Python's pickler memoizes every global and string; we memoize globals (enough to exercise BINPUT/BINGET).
class StateDictPickler {
 public:
  explicit StateDictPickler(const TorchBinOptions& o) : opt_(o) {}

  void global(const std::string& module, const std::string& name) {
    const std::string key = module + "." + name;
    auto it = memo_.find(key);
    if (it != memo_.end()) {
      w_.get(it->second);
      return;
    }
    w_.global(module, name).put(next_);
    memo_[key] = next_++;
  }
  void ordered_dict() { global("collections", "OrderedDict"), w_.tuple_n(0).reduce(); }

  void tensor(const TorchTensorSpec& t, const TorchStorageSpec& s) {
    const char* cls = storage_class(s.dtype);
    const bool v3 = cls == nullptr;
    if (t.as_parameter) global("torch._utils", "_rebuild_parameter");
    global("torch._utils", v3 ? "_rebuild_tensor_v3" : "_rebuild_tensor_v2");
    w_.mark();
    w_.mark().str("storage");
    global("torch", v3 ? "UntypedStorage" : cls);
    const int64_t numel = static_cast<int64_t>(s.bytes.size() / (v3 ? 1 : dtype_size(s.dtype)));
    w_.str(s.key).str(s.location).integer(numel).tuple().binpersid();
    w_.integer(t.storage_offset).int_tuple(t.size);
    std::vector<int64_t> stride = t.stride;
    if (stride.empty()) {
      stride.assign(t.size.size(), 1);
      for (std::size_t i = t.size.size(); i-- > 1;) stride[i - 1] = stride[i] * t.size[i];
    }
    w_.int_tuple(stride).boolean(false);
    ordered_dict();
    if (v3) global("torch", std::string(numpy_dtype_name(s.dtype)));
    w_.tuple().reduce();
    if (t.as_parameter) {
      w_.boolean(false);
      ordered_dict();
      w_.tuple_n(3).reduce();
    }
  }

  std::string run(const std::vector<TorchTensorSpec>& tensors, const std::vector<TorchStorageSpec>& storages) {
    std::map<std::string, const TorchStorageSpec*> by_key;
    for (const auto& s : storages) by_key[s.key] = &s;
    w_.proto(2);
    if (opt_.ordered_dict) ordered_dict();
    else w_.empty_dict();
    w_.put(next_++);
    w_.mark();
    for (const auto& t : tensors) {
      auto it = by_key.find(t.storage_key);
      if (it == by_key.end()) throw std::runtime_error("test writer: no storage " + t.storage_key);
      w_.str(t.name);
      tensor(t, *it->second);
    }
    w_.setitems();
    if (opt_.ordered_dict) {  // _metadata = OrderedDict([('', {'version': 1})])
      w_.empty_dict().str("_metadata");
      ordered_dict();
      w_.str("").empty_dict().str("version").integer(1).setitem().setitem().setitem().build();
    }
    w_.stop();
    return w_.bytes();
  }

 private:
  const TorchBinOptions& opt_;
  PickleWriter w_;
  std::map<std::string, uint32_t> memo_;
  uint32_t next_ = 100;
};

}  // namespace

PickleWriter& PickleWriter::proto(int v) { return out_ += '\x80', out_ += static_cast<char>(v), *this; }
PickleWriter& PickleWriter::global(std::string_view m, std::string_view n) {
  out_ += 'c';
  out_.append(m);
  out_ += '\n';
  out_.append(n);
  out_ += '\n';
  return *this;
}
PickleWriter& PickleWriter::str(std::string_view s) {
  out_ += 'X';
  le(out_, s.size(), 4);
  out_.append(s);
  return *this;
}
PickleWriter& PickleWriter::integer(int64_t v) {
  if (v >= 0 && v < 256) {
    out_ += 'K';
    le(out_, static_cast<uint64_t>(v), 1);
  } else if (v >= 0 && v < 65536) {
    out_ += 'M';
    le(out_, static_cast<uint64_t>(v), 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    out_ += 'J';
    le(out_, static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
  } else {
    out_ += '\x8a';
    out_ += '\x08';
    le(out_, static_cast<uint64_t>(v), 8);
  }
  return *this;
}
PickleWriter& PickleWriter::boolean(bool v) { return out_ += v ? '\x88' : '\x89', *this; }
PickleWriter& PickleWriter::none() { return out_ += 'N', *this; }
PickleWriter& PickleWriter::mark() { return out_ += '(', *this; }
PickleWriter& PickleWriter::tuple() { return out_ += 't', *this; }
PickleWriter& PickleWriter::tuple_n(int n) {
  static const char ops[] = {')', '\x85', '\x86', '\x87'};
  return out_ += ops[n], *this;
}
PickleWriter& PickleWriter::empty_dict() { return out_ += '}', *this; }
PickleWriter& PickleWriter::empty_list() { return out_ += ']', *this; }
PickleWriter& PickleWriter::setitem() { return out_ += 's', *this; }
PickleWriter& PickleWriter::setitems() { return out_ += 'u', *this; }
PickleWriter& PickleWriter::append() { return out_ += 'a', *this; }
PickleWriter& PickleWriter::reduce() { return out_ += 'R', *this; }
PickleWriter& PickleWriter::build() { return out_ += 'b', *this; }
PickleWriter& PickleWriter::binpersid() { return out_ += 'Q', *this; }
PickleWriter& PickleWriter::put(uint32_t i) {
  if (i < 256) {
    out_ += 'q';
    le(out_, i, 1);
  } else {
    out_ += 'r';
    le(out_, i, 4);
  }
  return *this;
}
PickleWriter& PickleWriter::get(uint32_t i) {
  if (i < 256) {
    out_ += 'h';
    le(out_, i, 1);
  } else {
    out_ += 'j';
    le(out_, i, 4);
  }
  return *this;
}
PickleWriter& PickleWriter::stop() { return out_ += '.', *this; }
PickleWriter& PickleWriter::raw(std::string_view b) { return out_.append(b), *this; }
PickleWriter& PickleWriter::int_tuple(const std::vector<int64_t>& v) {
  if (v.size() <= 3) {
    for (int64_t x : v) integer(x);
    return tuple_n(static_cast<int>(v.size()));
  }
  mark();
  for (int64_t x : v) integer(x);
  return tuple();
}

std::string torch_state_dict_pickle(const std::vector<TorchTensorSpec>& tensors,
                                    const std::vector<TorchStorageSpec>& storages, const TorchBinOptions& options) {
  return StateDictPickler(options).run(tensors, storages);
}

void write_zip(const std::filesystem::path& path, const std::vector<std::pair<std::string, std::string>>& entries,
               bool compress, std::size_t alignment, bool zip64) {
  if (compress) {
    zip_t* za = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, nullptr);
    if (!za) throw std::runtime_error("test writer: cannot create " + path.string());
    for (const auto& [name, bytes] : entries) {
      zip_source_t* src = zip_source_buffer(za, bytes.data(), bytes.size(), 0);
      const zip_int64_t idx = zip_file_add(za, name.c_str(), src, ZIP_FL_ENC_UTF_8);
      if (idx < 0) throw std::runtime_error("test writer: zip_file_add failed");
      zip_set_file_compression(za, static_cast<zip_uint64_t>(idx), ZIP_CM_DEFLATE, 9);
    }
    if (zip_close(za) != 0) throw std::runtime_error("test writer: zip_close failed");
    return;
  }
  const uint64_t sat32 = zip64 ? 0xFFFFFFFFu : 0;
  const int version = zip64 ? 45 : 20;
  std::string out, dir;
  for (const auto& [name, bytes] : entries) {
    const uint64_t offset = out.size();
    const std::size_t local_zip64 = zip64 ? 20 : 0;  // id, size, usize, csize
    const std::size_t fixed = 30 + name.size() + local_zip64 + (alignment ? 4 : 0);
    const std::size_t pad = alignment ? (alignment - (offset + fixed) % alignment) % alignment : 0;
    const uint32_t crc = crc32(bytes);
    le(out, 0x04034b50, 4), le(out, version, 2), le(out, 0, 2), le(out, 0, 2), le(out, 0, 2), le(out, 0x21, 2);
    le(out, crc, 4), le(out, zip64 ? sat32 : bytes.size(), 4), le(out, zip64 ? sat32 : bytes.size(), 4);
    le(out, name.size(), 2), le(out, local_zip64 + (alignment ? 4 + pad : 0), 2);
    out += name;
    if (zip64) le(out, 0x0001, 2), le(out, 16, 2), le(out, bytes.size(), 8), le(out, bytes.size(), 8);
    if (alignment) {
      le(out, 0x4246, 2), le(out, pad, 2);  // "FB": PyTorch's padding field
      out.append(pad, 'Z');
    }
    out += bytes;
    le(dir, 0x02014b50, 4), le(dir, version, 2), le(dir, version, 2), le(dir, 0, 2), le(dir, 0, 2), le(dir, 0, 2);
    le(dir, 0x21, 2), le(dir, crc, 4), le(dir, zip64 ? sat32 : bytes.size(), 4);
    le(dir, zip64 ? sat32 : bytes.size(), 4), le(dir, name.size(), 2), le(dir, zip64 ? 28 : 0, 2);
    le(dir, 0, 2), le(dir, 0, 2), le(dir, 0, 2), le(dir, 0, 4), le(dir, zip64 ? sat32 : offset, 4);
    dir += name;
    if (zip64) {
      le(dir, 0x0001, 2), le(dir, 24, 2), le(dir, bytes.size(), 8), le(dir, bytes.size(), 8), le(dir, offset, 8);
    }
  }
  const uint64_t dir_offset = out.size();
  out += dir;
  if (zip64) {
    const uint64_t end64 = out.size();
    le(out, 0x06064b50, 4), le(out, 44, 8), le(out, 45, 2), le(out, 45, 2), le(out, 0, 4), le(out, 0, 4);
    le(out, entries.size(), 8), le(out, entries.size(), 8), le(out, dir.size(), 8), le(out, dir_offset, 8);
    le(out, 0x07064b50, 4), le(out, 0, 4), le(out, end64, 8), le(out, 1, 4);
  }
  le(out, 0x06054b50, 4), le(out, 0, 2), le(out, 0, 2);
  le(out, zip64 ? 0xFFFF : entries.size(), 2), le(out, zip64 ? 0xFFFF : entries.size(), 2);
  le(out, zip64 ? sat32 : dir.size(), 4), le(out, zip64 ? sat32 : dir_offset, 4), le(out, 0, 2);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  if (!f) throw std::runtime_error("test writer: cannot write " + path.string());
}

std::vector<std::pair<std::string, std::string>> torch_bin_entries(const std::vector<TorchTensorSpec>& tensors,
                                                                   const std::vector<TorchStorageSpec>& storages,
                                                                   const TorchBinOptions& options) {
  const std::string& a = options.archive_name;
  std::vector<std::pair<std::string, std::string>> entries;
  entries.emplace_back(a + "/data.pkl", torch_state_dict_pickle(tensors, storages, options));
  if (options.write_byteorder) entries.emplace_back(a + "/byteorder", options.byteorder);
  for (const auto& s : storages) entries.emplace_back(a + "/data/" + s.key, s.bytes);
  entries.emplace_back(a + "/version", "3\n");
  return entries;
}

void write_torch_bin(const std::filesystem::path& path, const std::vector<TorchTensorSpec>& tensors,
                     const std::vector<TorchStorageSpec>& storages, const TorchBinOptions& options) {
  write_zip(path, torch_bin_entries(tensors, storages, options), options.compress, options.alignment, options.zip64);
}

std::string tensor_bytes(const Tensor& t) {
  const Tensor host = t.to(Device::cpu());
  if (host.nbytes() == 0) return {};
  return std::string(static_cast<const char*>(host.raw_data()), host.nbytes());
}

void save_torch_bin(const io::StateDict& state_dict, const std::filesystem::path& path,
                    const TorchBinOptions& options) {
  std::vector<TorchTensorSpec> tensors;
  std::vector<TorchStorageSpec> storages;
  for (const auto& [name, t] : state_dict) {
    const std::string key = std::to_string(storages.size());
    storages.push_back({key, t.dtype(), tensor_bytes(t)});
    tensors.push_back({name, key, t.shape()});
  }
  write_torch_bin(path, tensors, storages, options);
}

}  // namespace ferry::testing
