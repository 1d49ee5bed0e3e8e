// disk_bytes_of, staging_bytes_for, resolve_offload_io, staged_reader_for, plan_with_offload_io (see
// include/ferry/big_modeling/offload_plan.h).
#include "ferry/big_modeling/offload_plan.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "ferry/big_modeling/max_memory.h"
#include "ferry/big_modeling/prefetch.h"
#include "ferry/big_modeling/token_reads.h"  // row_lookup_tables
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

namespace {

// What each offloading hook loads at once (attach.cc puts one hook on every module with tensors of its own): the
// bytes of a module's own parameters that `placed` selects, `per_tensor_extra` more for each; largest first. A table
// read by the row (row_lookup_tables) is never loaded whole.
std::vector<std::size_t> hook_loads(const nn::Module& model, const DeviceMap& map, bool (*placed)(Device),
                                    std::size_t per_tensor_extra) {
  const std::vector<std::string> tables = row_lookup_tables(model);
  std::vector<std::size_t> loads;
  for (const auto& [prefix, module] : model.named_modules()) {
    std::size_t own = 0;
    for (const auto& [name, t] : module->named_parameters(/*recurse=*/false)) {
      const std::string full = prefix.empty() ? name : prefix + "." + name;
      if (std::binary_search(tables.begin(), tables.end(), full)) continue;
      const auto d = map.device_for(full);
      if (d && placed(*d)) own += t.nbytes() + per_tensor_extra;
    }
    if (own > 0) loads.push_back(own);
  }
  std::sort(loads.begin(), loads.end(), std::greater<>());
  return loads;
}

// The sum of the first `k` of `loads`.
std::size_t sum_first(const std::vector<std::size_t>& loads, std::size_t k) {
  std::size_t sum = 0;
  for (std::size_t i = 0; i < loads.size() && i < k; ++i) sum += loads[i];
  return sum;
}

}  // namespace

std::size_t staging_bytes_for(const nn::Module& model, const DeviceMap& map, int prefetch) {
  // A module's own disk-mapped tensors; a read widens each to whole 4096-byte blocks.
  const std::vector<std::size_t> loads = hook_loads(model, map, [](Device d) { return d.is_disk(); }, 2 * 4096);
  const std::size_t all = sum_first(loads, loads.size());
  if (all == 0) return 0;
  // The module computing, the `prefetch` read ahead, and one whose tensors are being released: the prefetch + 2
  // largest loads. At least 16 MiB (what the reader keeps in flight: 16 reads of 1 MiB), so small layers still
  // keep the queue deep; never more than the whole disk part.
  const std::size_t want = sum_first(loads, static_cast<std::size_t>(prefetch_reach(prefetch) + 2));
  return std::min(std::max<std::size_t>(want, std::size_t{16} << 20), all);
}

std::optional<Device> main_accelerator(const DeviceMap& map) {
  for (Device d : map.devices())
    if (d.is_accelerator()) return d;
  return std::nullopt;
}

std::size_t gpu_prefetch_bytes_for(const nn::Module& model, const DeviceMap& map, int prefetch) {
  prefetch = prefetch_reach(prefetch);
  if (prefetch <= 0 || !main_accelerator(map)) return 0;
  // A module's own cpu- or disk-placed tensors: the prefetcher keeps `prefetch` of them on the device ahead of use.
  return sum_first(hook_loads(model, map, [](Device d) { return d.is_cpu() || d.is_disk(); }, 0),
                   static_cast<std::size_t>(prefetch));
}

OffloadIoChoice resolve_offload_io(const nn::Module& model, const DeviceMap& map, OffloadIo requested,
                                   int prefetch) {
  OffloadIoChoice out;
  const std::uint64_t disk = disk_bytes_of(model, map);
  if (disk == 0) return out;
  out.io = choose_offload_io(requested, disk, cacheable_ram_bytes());
  if (out.io == OffloadIo::Direct) out.staging_bytes = staging_bytes_for(model, map, prefetch);
  return out;
}

io::StagedReaderOptions pinned_staging(io::StagedReaderOptions options) {
  options.allocate = [](std::size_t n) { return pinned_host_alloc(n); };
  options.release = [](void* p, std::size_t) { pinned_host_free(p); };
  return options;
}

std::shared_ptr<io::StagedReader> staged_reader_for(const nn::Module& model, const DeviceMap& map,
                                                    OffloadIo requested, int prefetch, std::size_t staging_bytes,
                                                    bool pinned) {
  const OffloadIoChoice c = resolve_offload_io(model, map, requested, prefetch);
  if (c.io != OffloadIo::Direct) return nullptr;
  io::StagedReaderOptions options{.pool_bytes = staging_bytes ? staging_bytes : c.staging_bytes};
  return std::make_shared<io::StagedReader>(pinned ? pinned_staging(std::move(options)) : std::move(options));
}

OffloadPlan plan_with_offload_io(const nn::Module& model, DeviceMapMode mode, const PlanOptions& options,
                                 OffloadIo requested, int prefetch) {
  OffloadPlan out;
  out.options = options;
  out.device_map = plan_device_map(model, mode, options);
  // Weights copied ahead to the GPU take room there beside the module computing (Accelerate's reserve).
  if (const std::size_t ahead = gpu_prefetch_bytes_for(model, out.device_map, prefetch); ahead > 0) {
    const Device main = *main_accelerator(out.device_map);
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
  if (out.choice.io != OffloadIo::Direct || out.choice.staging_bytes == 0) return out;
  // Reserving the pool leaves less cpu, so more may go to disk and the pool for the new map may be larger: plan again
  // with the larger reservation until the reserved pool holds what the map needs (the pool only grows, up to the
  // whole disk part, so this ends; in practice after one or two rounds). When the larger pool does not fit, the last
  // plan that did stays, with the pool it reserved: a pool under prefetch + 2 loads reads less far ahead, nothing
  // else changes.
  const PlanOptions before_pool = out.options;
  std::size_t reserved = out.choice.staging_bytes;
  bool planned = false;
  for (int round = 0;; ++round) {
    PlanOptions with_pool = before_pool;
    with_pool.reservations.push_back(
        {Device::cpu(), static_cast<int64_t>(reserved), "staging pool (direct disk reads)"});
    DeviceMap map;
    try {
      map = plan_device_map(model, mode, with_pool);
    } catch (const Error&) {
      if (planned) {
        log_info("the cpu budget cannot hold a {} staging pool for this plan: reading ahead within {}",
                 format_bytes(static_cast<int64_t>(reserved)),
                 format_bytes(static_cast<int64_t>(out.choice.staging_bytes)));
        return out;
      }
      if (requested == OffloadIo::Direct) throw;
      log_info("the cpu budget cannot also hold a {} staging pool; disk weights are read through the page cache",
               format_bytes(static_cast<int64_t>(reserved)));
      out.choice = OffloadIoChoice{};
      return out;
    }
    const OffloadIoChoice choice = resolve_offload_io(model, map, OffloadIo::Direct, prefetch);
    out.device_map = std::move(map);
    out.options = std::move(with_pool);
    out.choice = choice;
    out.choice.staging_bytes = reserved;  // the pool is what was reserved
    planned = true;
    if (choice.staging_bytes <= reserved || round == 7) return out;
    reserved = choice.staging_bytes;
  }
}

}  // namespace ferry
