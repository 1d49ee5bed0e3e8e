// Loading a checkpoint into a (usually empty) model according to a device map, and the one-call
// load_checkpoint_and_dispatch that plans, loads and dispatches.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/big_modeling/device_map.h"
#include "ferry/big_modeling/max_memory.h"
#include "ferry/big_modeling/offload_io.h"
#include "ferry/big_modeling/prefetch.h"
#include "ferry/core/process_group.h"
#include "ferry/io/offload.h"
#include "ferry/io/staged_reader.h"
#include "ferry/nn/module.h"

namespace ferry {

/// Where a load stands, for progress bars: reported after each tensor.
struct LoadProgress {
  std::size_t shard_index = 0, shard_count = 0;  // 1-based index of the shard being read
  std::string shard_name;
  std::size_t tensors_done = 0;                  // in this shard
  std::size_t tensors_in_shard = 0;
  std::size_t bytes_done = 0, bytes_total = 0;   // over the whole checkpoint (tensor bytes as stored)
};
using LoadProgressCallback = std::function<void(const LoadProgress&)>;

struct LoadCheckpointOptions {
  /// Where each tensor goes (longest whole-component prefix). Unset: each tensor stays on its current device
  /// (cpu for a meta tensor).
  std::optional<DeviceMap> device_map;
  /// Disk weights are written here in Accelerate's offload format — except safetensors weights whose dtype
  /// does not change, which are served from the checkpoint shards themselves (the index points into them;
  /// nothing is copied, and no folder is needed for them). The index is saved here when a folder is given.
  std::optional<std::filesystem::path> offload_folder;
  /// Floating-point tensors are converted to this dtype (integer and bool tensors never are).
  std::optional<DType> dtype;
  /// Park cpu-mapped weights in a temporary offload folder while loading, to keep peak RAM to one shard.
  bool offload_state_dict = false;
  /// Offload the buffers of disk modules too (otherwise they are loaded to cpu).
  bool offload_buffers = false;
  /// Modules kept in f32 when dtype is f16 or bf16 (Accelerate: only f16).
  std::vector<std::string> keep_in_fp32_modules;
  /// Unexpected and missing keys are errors instead of warnings.
  bool strict = false;
  /// transformers' base_model_prefix ("transformer", "model"; empty: none): a checkpoint key that names no tensor of
  /// the model but does with this prefix ("h.0.mlp..." of a bare BloomModel or GPT2Model checkpoint) loads as
  /// "<prefix>.h.0.mlp...", as from_pretrained does. Disk entries then point at the key the file holds.
  std::string base_model_prefix;
  /// Called after each tensor (empty: none).
  LoadProgressCallback on_progress;
  /// ferry: modules whose tensors are neither loaded nor reported missing or unexpected — those another rank of a
  /// pipeline loads (RankShare::remote, pipeline.h). They stay on the meta device.
  std::vector<std::string> skip_modules;
  /// Accelerate: broadcast_from_rank0 (with full_state_dict). Only rank 0 of `process_group` opens the checkpoint;
  /// each other rank tells it which of the model's tensors it loads (its skip_modules left out) and receives exactly
  /// those, bit for bit, never touching the files (its `checkpoint` path is not used; disk-mapped weights are written
  /// to its offload_folder). Every rank must call it. A group of one rank loads as usual.
  bool broadcast_from_rank0 = false;
  /// The ranks for broadcast_from_rank0 (nullptr: world_process_group()).
  std::shared_ptr<ProcessGroup> process_group;
};

/// What a load did: for reports and for dispatch_model.
struct LoadCheckpointResult {
  std::vector<std::string> missing_keys;     // in the model, not in the checkpoint (always reported)
  std::vector<std::string> unexpected_keys;  // in the checkpoint, not in the model
  io::OffloadIndex offload_index;            // the disk-mapped weights (also saved in offload_folder)
  std::size_t bytes_read = 0;                // checkpoint bytes of the tensors loaded
};

/// Accelerate: load_checkpoint_in_model(model, checkpoint, device_map, offload_folder, dtype,
/// offload_state_dict, offload_buffers, keep_in_fp32_modules, strict). `checkpoint` is a .safetensors or .bin
/// file, an *.index.json, or a folder holding one of them. Shards are read one at a time; each tensor goes
/// straight to its device (a zero-copy view of the file when it is cpu and the dtype is unchanged).
/// Differences on purpose: missing keys are always reported (Accelerate leaves them silently empty); buffers
/// of disk modules are loaded to cpu rather than skipped.
LoadCheckpointResult load_checkpoint_in_model(nn::Module& model, const std::filesystem::path& checkpoint,
                                              const LoadCheckpointOptions& options = {});

struct LoadAndDispatchOptions {
  /// A map, or one of "auto", "balanced", "balanced_low_0", "sequential". Unset: load to cpu, no dispatch.
  std::variant<std::monostate, DeviceMap, std::string> device_map;
  std::optional<MaxMemory> max_memory;
  std::vector<std::string> no_split_module_classes;
  std::optional<std::filesystem::path> offload_folder;
  bool offload_buffers = false;
  std::optional<DType> dtype;
  /// Default: on when the map has disk entries (as Accelerate).
  std::optional<bool> offload_state_dict;
  std::vector<std::string> skip_keys;
  std::vector<std::string> preload_module_classes;
  bool force_hooks = false;
  bool strict = false;
  LoadProgressCallback on_progress;
  /// Bytes to keep free per device for the KV cache and activations (ferry; none = Accelerate's plan).
  std::vector<Reservation> reservations;
  /// Beyond Accelerate: modules read ahead while one computes (DispatchOptions::prefetch; default measured per run).
  int prefetch = kPrefetchAuto;
  /// Beyond Accelerate: how disk weights are read (DispatchOptions::offload_io). For a mode, a direct plan reserves
  /// the staging pool from the cpu budget (plan_with_offload_io).
  OffloadIo offload_io = OffloadIo::Auto;
  /// Accelerate: broadcast_from_rank0 — only rank 0 of `process_group` opens the checkpoint, every rank ends with
  /// the whole model placed by its map (LoadCheckpointOptions::broadcast_from_rank0; disk-mapped weights are written
  /// to offload_folder on the other ranks). Every rank must call it with the same map or mode and budgets.
  bool broadcast_from_rank0 = false;
  std::shared_ptr<ProcessGroup> process_group;  // nullptr: world_process_group()
};

struct LoadAndDispatchResult {
  DeviceMap device_map;
  LoadCheckpointResult load;
};

/// Accelerate: load_checkpoint_and_dispatch. Resolves a mode to a map (get_balanced_memory for auto/balanced*,
/// infer_auto_device_map), loads, then dispatch_model.
LoadAndDispatchResult load_checkpoint_and_dispatch(nn::Module& model, const std::filesystem::path& checkpoint,
                                                   const LoadAndDispatchOptions& options = {});

}  // namespace ferry
