// dispatch_model: makes a model run according to a device map — modules on GPUs (or virtual devices) stay
// resident there, modules mapped to cpu or disk are offloaded and materialised on the main device for their
// forward, activations cross devices where the map says so.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ferry/big_modeling/device_map.h"
#include "ferry/big_modeling/offload_io.h"
#include "ferry/big_modeling/prefetch.h"
#include "ferry/io/offload.h"
#include "ferry/io/state_dict.h"
#include "ferry/io/weights_cache.h"
#include "ferry/nn/module.h"

namespace ferry {

/// The experts' cache of DispatchOptions::expert_cache. The caller sets `classes` and `capacity_bytes`;
/// dispatch_model sets `map` (the cache over the disk part) when some expert lives on disk; the caller reads stats().
struct ExpertCache {
  std::vector<std::string> classes;  ///< the expert modules' classes (LanguageModelInfo::experts.expert_class)
  std::size_t capacity_bytes = 0;    ///< 0: nothing is kept (every routed expert on disk is read), still counted
  std::shared_ptr<io::CachedWeightsMap> map;
  io::WeightsCacheStats stats() const {
    if (map) return map->stats();
    io::WeightsCacheStats s;
    s.capacity = capacity_bytes;
    return s;
  }
};

struct DispatchOptions {
  /// Where offloaded modules execute; default: the first device of the map that is neither cpu nor disk
  /// (Accelerate takes an arbitrary one of them), else cpu.
  std::optional<Device> main_device;
  /// Weights of the cpu-mapped modules; default: taken from the model (no copy).
  std::optional<io::StateDict> state_dict;
  /// Folder for disk-mapped weights; written from the model when it has no index.json.
  std::optional<std::filesystem::path> offload_dir;
  /// Index of disk-mapped weights (e.g. entries pointing into the checkpoint's safetensors shards).
  std::optional<io::OffloadIndex> offload_index;
  bool offload_buffers = false;
  /// Named inputs never moved between devices (a KV cache: "past_key_values").
  std::vector<std::string> skip_keys;
  std::vector<std::string> preload_module_classes;
  /// Attach hooks even when the whole map is one device.
  bool force_hooks = false;
  /// Beyond Accelerate: how many offloaded modules ahead to read while one computes (big_modeling/prefetch.h).
  /// kPrefetchAuto: measured per run (2 or 0, whichever makes the forwards shorter). 0: each module's weights are
  /// read when it starts, as Accelerate does. Outputs are identical either way.
  int prefetch = kPrefetchAuto;
  /// Read ahead with this prefetcher (the caller keeps it to ask its status()) instead of one made from `prefetch`;
  /// `prefetch` should still say its setting (it sizes the staging pool).
  std::shared_ptr<Prefetcher> prefetcher;
  /// Beyond Accelerate: how disk-mapped weights are read. Mmap: views of the page cache (Accelerate's way; right
  /// when RAM can cache them). Direct: O_DIRECT reads through io_uring into a bounded staging pool
  /// (io/staged_reader.h; right when RAM is short). Auto: Direct when the disk-placed bytes exceed what RAM can
  /// cache (choose_offload_io). Outputs are bit-identical either way.
  OffloadIo offload_io = OffloadIo::Auto;
  /// The staging pool's size for Direct; 0: staging_bytes_for(model, map, prefetch) (big_modeling/offload_plan.h).
  std::size_t staging_bytes = 0;
  /// Direct reads through this reader (its pool and statistics are the caller's), whatever offload_io says.
  std::shared_ptr<io::StagedReader> staged_reader;
  /// Beyond Accelerate: when the main device is a CUDA GPU, the cpu-placed weights are copied once into pinned
  /// (page-locked) host memory, so each forward's copies to the GPU are asynchronous DMA at the bus's speed instead
  /// of driver-staged pageable copies. false keeps them where they are (views of the checkpoint).
  bool pin_cpu_weights = true;
  /// Beyond Accelerate, mixtures of experts: experts placed on disk (modules of `classes`) go through a bounded LRU
  /// cache in RAM (io/weights_cache.h), so an expert routed to again soon is not read again. Null: none.
  std::shared_ptr<ExpertCache> expert_cache;
};

/// Accelerate: dispatch_model(model, device_map, main_device, state_dict, offload_dir, offload_index,
/// offload_buffers, skip_keys, preload_module_classes, force_hooks). The rules:
///  - the map must cover every tensor (check_device_map), else ferry::Error before anything moves;
///  - one device, no disk, no force_hooks: the model is simply moved there;
///  - otherwise cpu and disk modules are offloaded (only disk when the main device is cpu), one weights map
///    serves both (RAM first, then the folder), tied weights are materialised once per device, and the root
///    returns outputs to the input's device;
///  - afterwards, Module::to on the model throws while weights are offloaded (and warns otherwise);
///  - with offloaded modules and options.prefetch not 0 (or options.prefetcher), one Prefetcher shared by their hooks
///  reads ahead; when the
///    main device is an accelerator, the weights read ahead are also copied ahead (big_modeling/device_staging.h).
void dispatch_model(nn::Module& model, const DeviceMap& device_map, const DispatchOptions& options = {});

/// The tensors of `state_dict` that belong to any of `module_names` (whole dotted components; "" = all).
/// Accelerate: extract_submodules_state_dict
io::StateDict extract_submodules_state_dict(const io::StateDict& state_dict, const std::vector<std::string>& module_names);

}  // namespace ferry

namespace ferry {

/// The model's state dict with offloaded weights read back (copies, on cpu), in state_dict order.
/// Accelerate: get_state_dict_offloaded_model
io::StateDict get_state_dict_offloaded_model(nn::Module& model);

}  // namespace ferry
