// Offload folders in Accelerate's format, read and written both ways, plus the weight maps that serve offloaded
// weights to hooks (OffloadedWeightsLoader, PrefixedDataset).
//
// Format (accelerate/utils/offload.py): "index.json" = {name: {"dtype": "float32", "shape": [4, 3]}} and one
// "<name>.dat" per tensor holding its raw C-order bytes with no header. bf16 is stored as its raw 16-bit patterns
// and named "bfloat16"; 0-d tensors are stored as one element and indexed with shape []. An entry may instead point
// into a safetensors file ({"safetensors_file": path, "weight_name": name, "dtype": "float16"}, as transformers
// writes): the weight is read from there and nothing is copied into the folder. Relative safetensors paths are
// resolved against the offload folder (Accelerate resolves them against the working directory).
//
// Beyond Accelerate:
//   - Atomic writes: each .dat is written under a temporary name, fsync'd and renamed; index.json is merged and
//     written last the same way, under an flock, so a crash (even SIGKILL mid-write) leaves the previous index
//     intact and every entry it lists complete.
//   - fp8 (float8_e4m3fn, float8_e5m2), bool and every other ferry DType round-trip bit-exactly.
//   - Reads are zero-copy views of the mapped .dat (Accelerate copies on every access).
//   - OffloadedWeightsLoader builds its key list in O(N) (Accelerate is O(N·M), accelerate#4280); PrefixedDataset
//     matches whole dotted components ("a.1" never sees "a.10.weight"), and its keys()/size() count only the keys
//     under its prefix, without the prefix (Accelerate yields prefixed keys and the whole dataset's length).
// Names are checked: an index entry whose "<name>.dat" would not be a plain file in the folder is refused.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"
#include "ferry/io/safetensors.h"
#include "ferry/io/staged_reader.h"
#include "ferry/io/state_dict.h"

namespace ferry::io {

/// One index.json entry.
struct OffloadEntry {
  std::optional<DType> dtype;   // .dat entries: required. safetensors entries: cast to it when present.
  std::optional<Shape> shape;   // .dat entries: required ([] for 0-d). safetensors entries: unused.
  std::string safetensors_file; // non-empty: read from this safetensors file ...
  std::string weight_name;      // ... under this name (empty: the index key)
  std::string data_file;        // non-empty (ferry's extension): the raw bytes of a dtype/shape tensor inside this
  uint64_t data_offset = 0;     // file, from this byte offset (a GGUF file's tensor data)

  bool in_safetensors() const noexcept { return !safetensors_file.empty(); }
  bool in_data_file() const noexcept { return !data_file.empty(); }
  friend bool operator==(const OffloadEntry&, const OffloadEntry&) = default;
};

/// name -> entry, as in index.json.
using OffloadIndex = std::map<std::string, OffloadEntry>;

/// Writes `weight` to "<offload_folder>/<weight_name>.dat" (atomically, fsync'd) and records it in `index`.
/// The folder must exist. Tensors on other devices are copied to the host first; meta tensors are an error.
/// Accelerate: offload_weight
void offload_weight(const Tensor& weight, const std::string& weight_name, const std::filesystem::path& offload_folder,
                    OffloadIndex& index);
/// The same without an index to update.
void offload_weight(const Tensor& weight, const std::string& weight_name, const std::filesystem::path& offload_folder);

/// Merges `index` into "<offload_folder>/index.json" (entries of the same name are replaced, others kept
/// untouched) and writes it atomically. An empty index writes nothing. A corrupt existing index.json is an error
/// (it is not overwritten). Accelerate: save_offload_index
void save_offload_index(const OffloadIndex& index, const std::filesystem::path& offload_folder);

/// Writes every tensor of `state_dict` to `save_dir` (created if needed) and saves the index.
/// Accelerate: offload_state_dict
void offload_state_dict(const std::filesystem::path& save_dir, const StateDict& state_dict);

/// Parses index.json text (`where` names it in errors). Exposed for the fuzz target.
OffloadIndex parse_offload_index(std::string_view json, const std::string& where);
/// Reads "<offload_folder>/index.json". Throws ferry::Error when it is missing or malformed.
OffloadIndex load_offload_index(const std::filesystem::path& offload_folder);

/// The tensor stored in `weight_file` as `info` describes it: a read-only view of the mapped file (shape [] for a
/// 0-d tensor). Throws ferry::Error when the file's size does not match. Accelerate: load_offloaded_weight
Tensor load_offloaded_weight(const std::filesystem::path& weight_file, const OffloadEntry& info);

/// A tensor and whether its bytes belong to the one who holds it (WeightsMap::get_to_keep).
struct OwnedTensor {
  Tensor tensor;
  bool owned = false;
};

/// A read-only name -> tensor map that hooks pull weights from (Accelerate's `weights_map`, a Mapping).
/// Implementations are safe to call from several threads at once.
class WeightsMap {
 public:
  virtual ~WeightsMap() = default;
  /// The tensor of `key`. Throws ferry::Error naming the key when absent.
  virtual Tensor get(const std::string& key) const = 0;
  virtual bool contains(const std::string& key) const = 0;
  /// Keys in a stable order.
  virtual std::vector<std::string> keys() const = 0;
  virtual std::size_t size() const = 0;
  /// Advice that get(key) comes soon: bring its bytes into memory now. May block until they are there: it is
  /// called on the prefetch thread of a dispatched model (big_modeling/prefetch.h), never by a forward. Never
  /// needed for correctness (get() works the same without it); unknown keys are ignored. Returns whether anything
  /// had to be read: false when the bytes were already in memory (the prefetcher then checks that key less often).
  /// Default: nothing to do (weights in RAM).
  virtual bool prefetch(const std::string& key) const noexcept {
    (void)key;
    return false;
  }
  /// For a caller that keeps what it reads (a cache, io/weights_cache.h): get(key), and whether the tensor's bytes
  /// are the caller's alone — nothing else views or reuses them — so that keeping them costs no copy. Default:
  /// get(key), not owned.
  virtual OwnedTensor get_to_keep(const std::string& key) const { return {get(key), false}; }
  /// Rows `rows` (ascending, distinct) along the first dimension of the tensor of `key`, as one tensor
  /// [rows.size(), ...] of its dtype on the device get() gives: what an embedding lookup of an offloaded table reads.
  /// Throws ferry::Error naming the key for a 0-d tensor or a row out of range. Default: get(key), then a copy of
  /// those rows. OffloadedWeightsLoader with a staged reader reads only the rows' bytes from disk.
  virtual Tensor get_rows(const std::string& key, std::span<const int64_t> rows) const;
};

/// `rows` (ascending, distinct, within [0, t.size(0))) of `t` along its first dimension, copied (WeightsMap::get_rows
/// over a tensor in memory). `key` names t in errors.
Tensor gather_rows(const Tensor& t, std::span<const int64_t> rows, const std::string& key);

/// Weights from RAM first, then from an offload folder. Accelerate: OffloadedWeightsLoader
///
///   OffloadedWeightsLoader w({}, "offload");        // index.json read from the folder
///   Tensor t = w.get("model.layers.0.mlp.up_proj.weight");
class OffloadedWeightsLoader : public WeightsMap {
 public:
  /// `state_dict`: tensors kept in RAM (returned as they are). `save_folder`: the offload folder (its index.json
  /// is read unless `index` is given). `device`: where tensors read from disk are placed (default cpu; a cpu
  /// .dat read is a zero-copy view). Throws ferry::Error when save_folder is given without `index` and has no
  /// readable index.json. (Accelerate refuses state_dict=None and save_folder=None; C++ has no None, and an empty
  /// loader is harmless.)
  OffloadedWeightsLoader(StateDict state_dict = {}, std::optional<std::filesystem::path> save_folder = std::nullopt,
                         std::optional<OffloadIndex> index = std::nullopt, Device device = Device::cpu());

  Tensor get(const std::string& key) const override;
  /// Staged reads (set_staged_reader) give the staging buffer itself: it leaves the reader's pool (owned).
  OwnedTensor get_to_keep(const std::string& key) const override;
  /// Disk entries under a staged reader: only the rows' bytes are read (StagedReader::read_rows); otherwise the rows
  /// of get(key) (a mapped view touches only their pages).
  Tensor get_rows(const std::string& key, std::span<const int64_t> rows) const override;
  bool contains(const std::string& key) const override;
  /// Disk entries: reads the bytes get() will map into the page cache (the safetensors range, or the whole .dat
  /// file). RAM entries: nothing.
  bool prefetch(const std::string& key) const noexcept override;
  /// RAM keys in order, then the index's other keys (each once).
  std::vector<std::string> keys() const override { return all_keys_; }
  std::size_t size() const override { return all_keys_.size(); }

  const OffloadIndex& index() const noexcept { return index_; }

  /// Disk entries are read through `reader` from now on: O_DIRECT reads into its staging pool instead of mapped
  /// views (prefetch() starts the read, get() takes it). Null: mapped views again. Set it before the loader is used
  /// by a forward.
  void set_staged_reader(std::shared_ptr<StagedReader> reader) { reader_ = std::move(reader); }
  const std::shared_ptr<StagedReader>& staged_reader() const noexcept { return reader_; }

 private:
  /// The safetensors file an entry points into (relative paths against the offload folder), opened once.
  SafetensorsFile safetensors_of(const OffloadEntry& info) const;
  /// Where a disk entry's bytes are in its file, with their stored shape and dtype.
  struct DiskTensor {
    FileRange range;
    Shape shape;
    DType dtype;
  };
  DiskTensor locate(const std::string& key, const OffloadEntry& info) const;

  StateDict state_dict_;
  std::filesystem::path save_folder_;
  OffloadIndex index_;
  Device device_;
  std::vector<std::string> all_keys_;
  mutable std::mutex mu_;
  mutable std::map<std::filesystem::path, SafetensorsFile> open_files_;
  std::shared_ptr<StagedReader> reader_;

  OwnedTensor read(const std::string& key, bool keep) const;
};

/// The keys of `dataset` under `prefix`, seen without it. Accelerate: PrefixedDataset
///
///   PrefixedDataset layer(weights, "model.layers.1");   // "." is appended when missing
///   layer.get("mlp.up_proj.weight");                    // = weights.get("model.layers.1.mlp.up_proj.weight")
class PrefixedDataset : public WeightsMap {
 public:
  PrefixedDataset(std::shared_ptr<const WeightsMap> dataset, std::string prefix);

  Tensor get(const std::string& key) const override { return dataset_->get(prefix_ + key); }
  bool contains(const std::string& key) const override { return dataset_->contains(prefix_ + key); }
  bool prefetch(const std::string& key) const noexcept override { return dataset_->prefetch(prefix_ + key); }
  OwnedTensor get_to_keep(const std::string& key) const override { return dataset_->get_to_keep(prefix_ + key); }
  Tensor get_rows(const std::string& key, std::span<const int64_t> rows) const override {
    return dataset_->get_rows(prefix_ + key, rows);
  }
  /// The dataset's keys that start with the prefix (whole components), with the prefix removed. O(N).
  std::vector<std::string> keys() const override;
  std::size_t size() const override { return keys().size(); }

  const std::string& prefix() const noexcept { return prefix_; }
  const std::shared_ptr<const WeightsMap>& dataset() const noexcept { return dataset_; }

 private:
  std::shared_ptr<const WeightsMap> dataset_;
  std::string prefix_;  // empty, or ending in '.'
};

/// A weights map in which some keys are other names of keys of `dataset`: get("lm_head.weight") returns
/// dataset.get("model.embed_tokens.weight") when the first is an alias of the second. Tied parameters use it: a
/// checkpoint or offload folder stores a tied weight once, under one of its names, while the hooks of every module
/// that shares it ask for it by their own name. Keys `dataset` has itself are never redirected.
/// (No Accelerate counterpart: Accelerate fails with a KeyError when a tied weight's other name is on disk.)
///
///   AliasedWeightsMap w(loader, {{"lm_head.weight", "model.embed_tokens.weight"}});
class AliasedWeightsMap : public WeightsMap {
 public:
  AliasedWeightsMap(std::shared_ptr<const WeightsMap> dataset, std::map<std::string, std::string> aliases);

  Tensor get(const std::string& key) const override { return dataset_->get(resolve(key)); }
  bool contains(const std::string& key) const override { return dataset_->contains(resolve(key)); }
  bool prefetch(const std::string& key) const noexcept override { return dataset_->prefetch(resolve(key)); }
  Tensor get_rows(const std::string& key, std::span<const int64_t> rows) const override {
    return dataset_->get_rows(resolve(key), rows);
  }
  /// The dataset's keys, then the aliases. O(N).
  std::vector<std::string> keys() const override;
  std::size_t size() const override { return dataset_->size() + aliases_.size(); }

  const std::map<std::string, std::string>& aliases() const noexcept { return aliases_; }

 private:
  const std::string& resolve(const std::string& key) const;

  std::shared_ptr<const WeightsMap> dataset_;
  std::map<std::string, std::string> aliases_;  // alias -> key of dataset_
};

}  // namespace ferry::io
