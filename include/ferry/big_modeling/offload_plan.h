// Planning with the staging pool: when the disk part of a plan is read direct (O_DIRECT into a staging pool,
// io/staged_reader.h), the pool lives in RAM, so it is reserved from the cpu budget and the model planned again.
// from_pretrained and the `ferry` command plan through this, so the RAM they use stays within max_memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/big_modeling/device_map.h"
#include "ferry/big_modeling/offload_io.h"
#include "ferry/io/staged_reader.h"
#include "ferry/nn/module.h"

namespace ferry {

/// The staging pool direct disk reads need for `map`: the largest set of tensors one hook loads at once (a module's
/// own disk-mapped tensors) times prefetch_reach(prefetch) + 2 (kPrefetchAuto reads up to 2 ahead; the one computing,
/// the ones read ahead, one being released), at least 16 MiB (the reader's reads in flight), at most the disk part; 0
/// when nothing is on disk. Counted in the plan's cpu budget when direct reads are used.
std::size_t staging_bytes_for(const nn::Module& model, const DeviceMap& map, int prefetch);

/// The accelerator that runs `map`'s offloaded modules: the first of its devices that is one (as dispatch_model
/// picks its main device), or nullopt when it has none.
std::optional<Device> main_accelerator(const DeviceMap& map);

/// Device memory the weights copied ahead need on the accelerator that runs `map`'s offloaded (cpu- and
/// disk-placed) modules: the prefetch_reach(prefetch) largest loads of one hook (a module's own offloaded tensors),
/// which the prefetcher keeps on the device ahead of use (big_modeling/device_staging.h). 0 when the map has no
/// accelerator, nothing offloaded, or prefetch is 0. Reserved on that device by plan_with_offload_io.
std::size_t gpu_prefetch_bytes_for(const nn::Module& model, const DeviceMap& map, int prefetch);

/// Bytes of the tensors `map` puts on disk.
std::uint64_t disk_bytes_of(const nn::Module& model, const DeviceMap& map);

/// How a device map's disk part is read.
struct OffloadIoChoice {
  OffloadIo io = OffloadIo::Mmap;  ///< Direct or Mmap (Auto resolved); Mmap when nothing is on disk
  std::size_t staging_bytes = 0;           ///< the staging pool for Direct (staging_bytes_for), else 0
};

/// Resolves `requested` for `map`: Auto becomes Direct when the disk part exceeds what RAM can cache
/// (choose_offload_io with cacheable_ram_bytes()), else Mmap.
OffloadIoChoice resolve_offload_io(const nn::Module& model, const DeviceMap& map, OffloadIo requested, int prefetch);

/// The reader for `map`'s disk part when resolve_offload_io says Direct (its pool `staging_bytes`, or the choice's
/// when 0), else null. dispatch_model and disk_offload decide with it, as the plan does. `pinned`: the staging
/// memory is page-locked (pinned_host_alloc), so a GPU copies the weights out of it by DMA — for a CUDA execution
/// device.
std::shared_ptr<io::StagedReader> staged_reader_for(const nn::Module& model, const DeviceMap& map,
                                                    OffloadIo requested, int prefetch, std::size_t staging_bytes = 0,
                                                    bool pinned = false);

/// Reader options whose staging memory is pinned (pinned_host_alloc / pinned_host_free).
io::StagedReaderOptions pinned_staging(io::StagedReaderOptions options);

struct OffloadPlan {
  DeviceMap device_map;
  PlanOptions options;  ///< what it was planned with: `reservations` holds the staging pool when one is reserved
  OffloadIoChoice choice;
};

/// plan_device_map; when the plan offloads behind an accelerator and prefetches, gpu_prefetch_bytes_for is reserved
/// on it ("prefetched weights") and the model planned again; then resolve_offload_io; when that is Direct, the staging pool is reserved from the cpu budget
/// ("staging pool (direct disk reads)") and the model planned again. When the budget cannot also hold the pool,
/// Auto falls back to Mmap (logged) and Direct is the planner's ferry::Error.
OffloadPlan plan_with_offload_io(const nn::Module& model, DeviceMapMode mode, const PlanOptions& options,
                                 OffloadIo requested, int prefetch);

}  // namespace ferry
