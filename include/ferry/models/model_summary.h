// What a model folder holds, without loading it: the library side of `ferry inspect` — architecture, parameter
// count, dtypes, shard list and tensor table. safetensors headers are read (not the data); .bin shards are opened
// through the restricted unpickler (zero-copy for stored entries).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"
#include "ferry/io/checkpoint.h"
#include "ferry/models/language_model.h"

namespace ferry::models {

/// One tensor as the checkpoint stores it.
struct CheckpointTensorInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t nbytes = 0;
  std::string file;  // shard file name
};

/// One shard file.
struct CheckpointShardInfo {
  std::string file;
  uint64_t file_bytes = 0;
  std::size_t tensor_count = 0;
  uint64_t tensor_bytes = 0;
};

struct ModelSummary {
  std::filesystem::path folder;
  LanguageModelInfo info;                 // architecture, block class, sizes
  std::string layers_prefix;              // the repeated blocks: "model.layers", "transformer.h", "encoder.block"
  int64_t num_layers = 0;                 // blocks under layers_prefix (an encoder-decoder model's encoder's)
  std::optional<DType> config_dtype;      // config.json's dtype / torch_dtype
  io::CheckpointFormat format = io::CheckpointFormat::Safetensors;
  bool sharded = false;                   // an *.index.json names the shards
  int64_t parameter_count = 0;            // the architecture's parameters, tied ones counted once
  int64_t checkpoint_elements = 0;        // elements stored in the checkpoint (all tensors)
  std::vector<std::pair<DType, int64_t>> stored_dtypes;  // elements per stored dtype, most first
  std::vector<CheckpointShardInfo> shards;
  std::vector<CheckpointTensorInfo> tensors;  // shard by shard, in file order
};

/// Reads config.json and the checkpoint's tensor list. Throws ferry::Error for a bad config, an unknown
/// architecture or missing/malformed shards (like from_pretrained, before any weight is read).
ModelSummary summarize_model(const std::filesystem::path& folder);

}  // namespace ferry::models
