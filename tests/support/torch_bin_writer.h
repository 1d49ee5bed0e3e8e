// Test helper: writes PyTorch .bin checkpoints the way torch.save does (zip archive, pickle protocol 2), so tests
// of every layer can create .bin fixtures without Python — and so io tests can craft malicious or broken ones.
//
// What torch.save(state_dict) writes (torch/serialization.py, _save): "<archive>/data.pkl" (the pickle),
// "<archive>/data/<key>" (one stored, uncompressed entry per storage, data 64-byte aligned through padding in the
// local header's extra field), "<archive>/byteorder" ("little"), "<archive>/version". In the pickle each tensor is
// REDUCE(torch._utils._rebuild_tensor_v2, (BINPERSID(('storage', torch.FloatStorage, key, 'cpu', numel)), offset,
// size, stride, False, OrderedDict())), and a module's state dict is an OrderedDict carrying `_metadata` via BUILD.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"
#include "ferry/io/state_dict.h"

namespace ferry::testing {

/// Emits pickle opcodes one by one (each method appends one opcode and its operand).
class PickleWriter {
 public:
  PickleWriter& proto(int version = 2);
  PickleWriter& global(std::string_view module, std::string_view name);  // GLOBAL
  PickleWriter& str(std::string_view s);                                // BINUNICODE
  PickleWriter& integer(int64_t v);  // BININT1 / BININT2 / BININT / LONG1, as Python picks
  PickleWriter& boolean(bool v);
  PickleWriter& none();
  PickleWriter& mark();
  PickleWriter& tuple();             // TUPLE (pops to the mark)
  PickleWriter& tuple_n(int n);      // EMPTY_TUPLE, TUPLE1, TUPLE2, TUPLE3
  PickleWriter& empty_dict();
  PickleWriter& empty_list();
  PickleWriter& setitem();
  PickleWriter& setitems();
  PickleWriter& append();
  PickleWriter& reduce();
  PickleWriter& build();
  PickleWriter& binpersid();
  PickleWriter& put(uint32_t index);  // BINPUT / LONG_BINPUT
  PickleWriter& get(uint32_t index);  // BINGET / LONG_BINGET
  PickleWriter& stop();
  PickleWriter& raw(std::string_view bytes);
  /// A tuple of ints the way Python pickles it (EMPTY_TUPLE, TUPLE1..3 or MARK ... TUPLE).
  PickleWriter& int_tuple(const std::vector<int64_t>& v);

  const std::string& bytes() const noexcept { return out_; }

 private:
  std::string out_;
};

/// One tensor: a view of a storage, in elements.
struct TorchTensorSpec {
  std::string name;
  std::string storage_key;       // the storage it views ("0", "1", ...)
  Shape size;
  std::vector<int64_t> stride;   // empty: contiguous
  int64_t storage_offset = 0;
  bool as_parameter = false;     // wrap in torch._utils._rebuild_parameter
};

/// One storage: its bytes and element type (the storage class: FloatStorage for F32, ...).
struct TorchStorageSpec {
  std::string key;
  DType dtype = DType::F32;
  std::string bytes;
  std::string location = "cpu";
};

struct TorchBinOptions {
  std::string archive_name = "archive";
  bool ordered_dict = true;      // OrderedDict + BUILD({'_metadata': ...}), as model.state_dict() pickles
  bool compress = false;         // deflate every entry (through libzip) instead of torch's stored entries
  bool write_byteorder = true;   // PyTorch >= 1.12 writes "<archive>/byteorder"
  std::string byteorder = "little";
  std::size_t alignment = 64;    // data alignment of stored entries
  bool zip64 = false;            // ZIP64 records, as torch writes for checkpoints over 4 GiB
};

/// The data.pkl torch.save would write for these tensors.
std::string torch_state_dict_pickle(const std::vector<TorchTensorSpec>& tensors,
                                    const std::vector<TorchStorageSpec>& storages, const TorchBinOptions& options = {});

/// Writes a zip archive of (name, bytes) entries: stored with aligned data (torch's layout) or deflated. With
/// `zip64`, sizes and offsets go through ZIP64 extra fields and end records even though they would fit.
void write_zip(const std::filesystem::path& path, const std::vector<std::pair<std::string, std::string>>& entries,
               bool compress = false, std::size_t alignment = 64, bool zip64 = false);

/// The entries of a torch.save archive (data.pkl, data/<key>..., byteorder, version).
std::vector<std::pair<std::string, std::string>> torch_bin_entries(const std::vector<TorchTensorSpec>& tensors,
                                                                   const std::vector<TorchStorageSpec>& storages,
                                                                   const TorchBinOptions& options = {});

/// Writes a complete torch.save-style .bin file.
void write_torch_bin(const std::filesystem::path& path, const std::vector<TorchTensorSpec>& tensors,
                     const std::vector<TorchStorageSpec>& storages, const TorchBinOptions& options = {});

/// Writes `state_dict` as pytorch_model.bin would be (one contiguous storage per tensor, host tensors only).
void save_torch_bin(const io::StateDict& state_dict, const std::filesystem::path& path,
                    const TorchBinOptions& options = {});

/// The raw bytes of a host tensor (for TorchStorageSpec::bytes).
std::string tensor_bytes(const Tensor& t);

}  // namespace ferry::testing
