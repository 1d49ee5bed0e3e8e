// disk_bytes_of, staging_bytes_for, resolve_offload_io, staged_reader_for, plan_with_offload_io (see
// include/ferry/big_modeling/offload_plan.h).
#include "ferry/big_modeling/offload_plan.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "ferry/big_modeling/max_memory.h"
#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"

namespace ferry {

std::uint64_t disk_bytes_of(const nn::Module& model, const DeviceMap& map) {
  std::uint64_t total = 0;
  for (const auto& [name, t] : model.state_dict()) {
    const auto d = map.device_for(name);
    if (d && d->is_disk()) total += t.nbytes();
  }
  return total;
}

std::size_t staging_bytes_for(const nn::Module& model, const DeviceMap& map, int prefetch) {
  std::vector<std::size_t> loads;  // what each hook loads at once: a module's own disk-mapped tensors
  std::size_t all = 0;
  for (const auto& [prefix, module] : model.named_modules()) {
    std::size_t own = 0;
    for (const auto& [name, t] : module->named_parameters(/*recurse=*/false)) {
      const auto d = map.device_for(prefix.empty() ? name : prefix + "." + name);
      if (d && d->is_disk()) own += t.nbytes() + 2 * 4096;  // a read widens to whole blocks
    }
    if (own == 0) continue;
    all += own;
    loads.push_back(own);
  }
  if (all == 0) return 0;
  // The module computing, the `prefetch` read ahead, and one whose tensors are being released: the prefetch + 2
  // largest loads. At least 16 MiB (what the reader keeps in flight: 16 reads of 1 MiB), so small layers still
  // keep the queue deep; never more than the whole disk part.
  std::sort(loads.begin(), loads.end(), std::greater<>());
  std::size_t want = 0;
  for (std::size_t i = 0; i < loads.size() && i < static_cast<std::size_t>(std::max(prefetch, 0) + 2); ++i)
    want += loads[i];
  return std::min(std::max<std::size_t>(want, std::size_t{16} << 20), all);
}

std::size_t gpu_prefetch_bytes_for(const nn::Module& model, const DeviceMap& map, int prefetch) {
  if (prefetch <= 0) return 0;
  const std::vector<Device> devices = map.devices();
  if (std::none_of(devices.begin(), devices.end(), [](Device d) { return d.is_accelerator(); })) return 0;
  // What each offloading hook loads at once: a module's own cpu- or disk-placed tensors (attach.cc puts one hook on
  // every module with tensors of its own). The prefetcher keeps `prefetch` of them on the device ahead of use.
  std::vector<std::size_t> loads;
  for (const auto& [prefix, module] : model.named_modules()) {
    std::size_t own = 0;
    for (const auto& [name, t] : module->named_parameters(/*recurse=*/false)) {
      const auto d = map.device_for(prefix.empty() ? name : prefix + "." + name);
      if (d && (d->is_cpu() || d->is_disk())) own += t.nbytes();
    }
    if (own > 0) loads.push_back(own);
  }
  std::sort(loads.begin(), loads.end(), std::greater<>());
  std::size_t ahead = 0;
  for (std::size_t i = 0; i < loads.size() && i < static_cast<std::size_t>(prefetch); ++i) ahead += loads[i];
  return ahead;
}

OffloadIoChoice resolve_offload_io(const nn::Module& model, const DeviceMap& map, io::OffloadIo requested,
                                   int prefetch) {
  OffloadIoChoice out;
  const std::uint64_t disk = disk_bytes_of(model, map);
  if (disk == 0) return out;
  out.io = io::choose_offload_io(requested, disk, io::cacheable_ram_bytes());
  if (out.io == io::OffloadIo::Direct) out.staging_bytes = staging_bytes_for(model, map, prefetch);
  return out;
}

io::StagedReaderOptions pinned_staging(io::StagedReaderOptions options) {
  options.allocate = [](std::size_t n) { return pinned_host_alloc(n); };
  options.release = [](void* p, std::size_t) { pinned_host_free(p); };
  return options;
}

std::shared_ptr<io::StagedReader> staged_reader_for(const nn::Module& model, const DeviceMap& map,
                                                    io::OffloadIo requested, int prefetch, std::size_t staging_bytes,
                                                    bool pinned) {
  const OffloadIoChoice c = resolve_offload_io(model, map, requested, prefetch);
  if (c.io != io::OffloadIo::Direct) return nullptr;
  io::StagedReaderOptions options{.pool_bytes = staging_bytes ? staging_bytes : c.staging_bytes};
  return std::make_shared<io::StagedReader>(pinned ? pinned_staging(std::move(options)) : std::move(options));
}

OffloadPlan plan_with_offload_io(const nn::Module& model, DeviceMapMode mode, const PlanOptions& options,
                                 io::OffloadIo requested, int prefetch) {
  OffloadPlan out;
  out.options = options;
  out.device_map = plan_device_map(model, mode, options);
  // Weights copied ahead to the GPU take room there beside the module computing (Accelerate's reserve).
  if (const std::size_t ahead = gpu_prefetch_bytes_for(model, out.device_map, prefetch); ahead > 0) {
    Device main = Device::cpu();
    for (Device d : out.device_map.devices())
      if (d.is_accelerator()) {
        main = d;
        break;
      }
    PlanOptions with_ahead = out.options;
    with_ahead.reservations.push_back({main, static_cast<int64_t>(ahead), "prefetched weights (copied ahead)"});
    try {
      out.device_map = plan_device_map(model, mode, with_ahead);
      out.options = std::move(with_ahead);
    } catch (const Error& e) {
      log_warning("{} cannot also hold {} of weights copied ahead ({}); if it runs out of memory, use --prefetch 0",
                  main.str(), format_bytes(static_cast<int64_t>(ahead)), e.problem());
    }
  }
  out.choice = resolve_offload_io(model, out.device_map, requested, prefetch);
  if (out.choice.io != io::OffloadIo::Direct || out.choice.staging_bytes == 0) return out;
  PlanOptions with_pool = out.options;
  with_pool.reservations.push_back(
      {Device::cpu(), static_cast<int64_t>(out.choice.staging_bytes), "staging pool (direct disk reads)"});
  try {
    out.device_map = plan_device_map(model, mode, with_pool);
  } catch (const Error&) {
    if (requested == io::OffloadIo::Direct) throw;
    log_info("the cpu budget cannot also hold a {} staging pool; disk weights are read through the page cache",
             format_bytes(static_cast<int64_t>(out.choice.staging_bytes)));
    out.choice = OffloadIoChoice{};
    return out;
  }
  out.options = std::move(with_pool);
  // Planned again with less cpu, more may be on disk: the pool for the new map (reserved as computed above).
  out.choice = resolve_offload_io(model, out.device_map, io::OffloadIo::Direct, prefetch);
  return out;
}

}  // namespace ferry
