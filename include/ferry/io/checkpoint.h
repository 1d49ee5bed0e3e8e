// Checkpoint discovery: from what a user points at (a file, an *.index.json, or a Hugging Face folder) to the list
// of shard files to load, checked before any loading starts.
//
// Accepted forms:
//   model.safetensors | pytorch_model.bin | any.safetensors | any.bin      one file
//   model.safetensors.index.json | pytorch_model.bin.index.json           shards named by "weight_map"
//   a folder holding one of the above. Where several are present safetensors wins, single file before index, and
//   the choice is logged (info). Without the standard names, exactly one *.index.json, then exactly one
//   *.safetensors, is used.
// Shard names in an index must be plain file names inside the index's folder: no "/", no "..", not absolute, and
// not a symlink leading out of the folder — except into the "blobs" folder of a Hugging Face hub cache
// (models--org--name/snapshots/<rev>/x -> ../../blobs/<sha>), which is how every downloaded model is laid out.
// Every missing shard is reported at once, before anything is read.
//
// Accelerate: the file-finding part of load_checkpoint_in_model; transformers: get_checkpoint_shard_files.
// Accelerate differs: it tries pytorch_model.bin before model.safetensors and does not check shard names.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/core/dtype.h"
#include "ferry/io/state_dict.h"

namespace ferry::io {

enum class CheckpointFormat { Safetensors, TorchBin };

/// A parsed *.index.json: {"metadata": {"total_size": N, ...}, "weight_map": {tensor: shard file name}}.
struct CheckpointIndex {
  std::optional<uint64_t> total_size;
  std::map<std::string, std::string> weight_map;
};

/// Parses and validates an index's text (`where` names it in errors): strict JSON, "weight_map" an object of
/// non-empty strings naming plain files, "metadata" (optional) an object whose "total_size" is a non-negative
/// integer. Exposed for the fuzz target.
CheckpointIndex parse_checkpoint_index(std::string_view json, const std::string& where);

/// What to load.
struct CheckpointFiles {
  CheckpointFormat format = CheckpointFormat::Safetensors;
  std::filesystem::path folder;                   // where the shards live
  std::vector<std::filesystem::path> shards;      // load order: sorted, unique
  std::optional<std::filesystem::path> index_file;
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name; empty for a single file
};

/// Resolves `checkpoint` (file, index or folder) to its shard files. Throws ferry::Error when nothing usable is
/// found (listing what was looked for), when an index is malformed, when a shard name is not a plain file name in
/// the folder, or when shards are missing (all of them named). Accelerate: load_checkpoint_in_model (file lookup)
CheckpointFiles get_checkpoint_shard_files(const std::filesystem::path& checkpoint);

/// The format of one checkpoint file, from its extension (.safetensors, .bin/.pt/.pth), else from its first bytes.
CheckpointFormat checkpoint_file_format(const std::filesystem::path& file);

/// Loads one checkpoint file (safetensors: zero-copy views; .bin: see torch_bin.h). Float tensors are converted to
/// `dtype` when given. Accelerate: load_state_dict
StateDict load_state_dict(const std::filesystem::path& file, std::optional<DType> dtype = std::nullopt);

/// Loads every shard of `checkpoint` into one StateDict (shard by shard, in order) and checks that every tensor the
/// index names is in the shard it names. For small models and tools; big_modeling loads shard by shard itself.
StateDict load_checkpoint(const std::filesystem::path& checkpoint, std::optional<DType> dtype = std::nullopt);

/// True for a plain file name: non-empty, no '/', '\\' or NUL, not "." or "..".
bool is_plain_file_name(std::string_view name) noexcept;

}  // namespace ferry::io
