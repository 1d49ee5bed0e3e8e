// plan_with_offload_io, resolve_offload_io (see include/ferry/big_modeling/offload_plan.h).
#include "ferry/big_modeling/offload_plan.h"

#include "ferry/big_modeling/dispatch.h"
#include "ferry/big_modeling/max_memory.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"

namespace ferry {

OffloadIoChoice resolve_offload_io(const nn::Module& model, const DeviceMap& map, io::OffloadIo requested,
                                   int prefetch) {
  OffloadIoChoice out;
  const std::uint64_t disk = disk_bytes_of(model, map);
  if (disk == 0) return out;
  out.io = io::choose_offload_io(requested, disk, io::cacheable_ram_bytes());
  if (out.io == io::OffloadIo::Direct) out.staging_bytes = staging_bytes_for(model, map, prefetch);
  return out;
}

OffloadPlan plan_with_offload_io(const nn::Module& model, DeviceMapMode mode, const PlanOptions& options,
                                 io::OffloadIo requested, int prefetch) {
  OffloadPlan out;
  out.options = options;
  out.device_map = plan_device_map(model, mode, options);
  out.choice = resolve_offload_io(model, out.device_map, requested, prefetch);
  if (out.choice.io != io::OffloadIo::Direct || out.choice.staging_bytes == 0) return out;
  PlanOptions with_pool = options;
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
