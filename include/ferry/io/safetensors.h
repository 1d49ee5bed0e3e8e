// safetensors: reading (mmap, zero-copy, validated) and writing (single file or sharded with an index).
//
// Format (https://github.com/huggingface/safetensors): 8-byte little-endian header length N, N bytes of UTF-8 JSON
// {"__metadata__": {str: str}, name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...}, then the
// data section; offsets are relative to its start, and the tensors tile it exactly (sorted, no holes, no overlap).
//
// Files are untrusted: the header is validated completely before any tensor is handed out, and every failure is a
// ferry::Error naming the file, the tensor and the problem. Tensors are read-only views of the mapping
// (Storage::Kind::MappedView, one storage per tensor, so tied-weight detection by shared storage is not fooled);
// they keep the file mapped for as long as they live. Only a dtype change (or a misaligned tensor in a
// hand-made file) copies bytes.
//
// Deliberately left out: the dtypes ferry has no DType for (U16/U32/U64, F8_E8M0, F4, complex) are refused by
// name; tensors sharing bytes are written twice by the writer (safetensors has no aliasing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"
#include "ferry/io/state_dict.h"

namespace ferry {
class MappedFile;
}

namespace ferry::io {

/// Largest header accepted (the reference implementation's cap): a bigger length field is corruption or an attack.
inline constexpr std::size_t kSafetensorsMaxHeader = 100'000'000;

/// One tensor as the header describes it.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::size_t begin = 0;  // byte offsets within the data section
  std::size_t end = 0;
};

/// A validated header.
struct SafetensorsHeader {
  std::size_t data_start = 0;                    // absolute file offset of the data section (8 + N)
  std::vector<SafetensorsEntry> tensors;         // in data order (by begin)
  std::map<std::string, std::string> metadata;   // __metadata__, e.g. {"format": "pt"}
};

/// Parses and validates the header of a safetensors file given its complete bytes (`data`, `size`).
/// `where` names the file in errors. Exposed for the fuzz target and for tools that only inspect headers.
SafetensorsHeader parse_safetensors_header(const uint8_t* data, std::size_t size, const std::string& where);

/// An open, validated safetensors file. Cheap to copy (shares the mapping). Thread-safe for concurrent reads.
///
///   auto f = SafetensorsFile::open("model.safetensors");
///   Tensor w = f.get("lm_head.weight");                 // zero-copy view
///   Tensor w32 = f.get("lm_head.weight", DType::F32);   // converted copy unless already f32
class SafetensorsFile {
 public:
  /// Maps and validates `path`. Throws ferry::Error naming the file (and tensor) on any problem.
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const noexcept;
  const std::map<std::string, std::string>& metadata() const noexcept { return header_->metadata; }
  /// Entries in data order.
  const std::vector<SafetensorsEntry>& entries() const noexcept { return header_->tensors; }
  /// Absolute file offset of the data section: a tensor's bytes are at data_start() + entry.begin.
  std::size_t data_start() const noexcept { return header_->data_start; }
  std::vector<std::string> keys() const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  /// nullptr when absent.
  const SafetensorsEntry* find(std::string_view name) const;

  /// The tensor `name` as a read-only cpu view of the mapping. Throws ferry::Error (file: name) when absent.
  Tensor get(std::string_view name) const;
  /// The tensor converted to `dtype` (a view when it already has that dtype). Accelerate: safe_open().get_tensor + .to
  Tensor get(std::string_view name, DType dtype) const;
  /// Writes the tensor `name` into `dst` (same shape; converted to dst's dtype), straight from the mapping into
  /// dst's bytes when dst is host memory — no temporary — e.g. into an already allocated parameter or a reused
  /// staging buffer. Throws ferry::Error for a shape mismatch, an absent name or a read-only/meta `dst`.
  void read_into(std::string_view name, Tensor& dst) const;
  /// Reads the bytes of `name` into memory and maps them, returning when done, so that a later get() (from any
  /// thread) finds them resident: what the first accesses would do, done ahead on a helper thread
  /// (MappedFile::populate). Pages already in the page cache cost only a residency check. An absent name is ignored.
  /// Returns whether anything had to be read (false: already resident, or no such tensor).
  bool prefetch(std::string_view name) const noexcept;
  /// Every tensor, in data order; float tensors converted to `dtype` when given (integer and bool tensors keep
  /// theirs, as in Accelerate's load_checkpoint_in_model). Accelerate: safetensors.torch.load_file
  StateDict load(std::optional<DType> dtype = std::nullopt) const;

 private:
  std::shared_ptr<const MappedFile> file_;
  std::shared_ptr<const SafetensorsHeader> header_;
  std::shared_ptr<const std::unordered_map<std::string_view, std::size_t>> index_;
};

/// Shorthand for SafetensorsFile::open(path).load(dtype).
StateDict load_safetensors(const std::filesystem::path& path, std::optional<DType> dtype = std::nullopt);

/// Default metadata written by ferry: {"format": "pt"}, which transformers requires to load the file.
std::map<std::string, std::string> default_safetensors_metadata();

/// Writes `tensors` (in their order, grouped by element size so every tensor is aligned to it) to `path`:
/// header padded with spaces so the data section starts at a multiple of 8. Tensors on other devices are copied
/// to the host; meta tensors are an error. Written to a temporary file in the same folder and renamed into place.
/// Accelerate: safetensors.torch.save_file
void save_safetensors(const StateDict& tensors, const std::filesystem::path& path,
                      const std::map<std::string, std::string>& metadata = default_safetensors_metadata());

/// Where a sharded save put things.
struct ShardedSave {
  std::vector<std::filesystem::path> shards;         // in order
  std::optional<std::filesystem::path> index;        // absent when everything fit in one file
  std::map<std::string, std::string> weight_map;     // tensor -> shard file name (empty when not sharded)
  std::size_t total_size = 0;                        // sum of tensor bytes
};

/// Splits `tensors` into shards of at most `max_shard_size` bytes of tensor data (a tensor bigger than that gets a
/// shard of its own), written to `folder` as "<prefix>-00001-of-0000N.safetensors" plus
/// "<prefix>.safetensors.index.json" ({"metadata": {"total_size": N}, "weight_map": {name: file}}), or as one
/// "<prefix>.safetensors" without an index when a single shard suffices — the layout transformers'
/// save_pretrained(max_shard_size=...) writes. The index is written last.
ShardedSave save_sharded_safetensors(const StateDict& tensors, const std::filesystem::path& folder,
                                     std::size_t max_shard_size, std::string_view prefix = "model",
                                     const std::map<std::string, std::string>& metadata =
                                         default_safetensors_metadata());

}  // namespace ferry::io
