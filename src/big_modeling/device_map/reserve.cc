// Memory is never a surprise (DESIGN.md, big_modeling 17): reservations for what is not weights (KV cache,
// activations, prefetch staging) come off the budget before planning, and with disk offload off a model that
// cannot fit fails here, with the numbers, before a byte of it is read. Also device_map_usage, the bytes a plan
// puts on each device.
#include <fmt/format.h>

#include <map>

#include "ferry/core/error.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_tensors.h"  // named_module_tensors
#include "planner.h"

namespace ferry::detail {

MaxMemory budget_after_reservations(MaxMemory budget, const std::vector<Reservation>& reservations) {
  std::map<Device, std::pair<int64_t, std::string>> per_device;  // total and what it is for
  for (const auto& r : reservations) {
    if (r.bytes < 0)
      throw Error(fmt::format("reservation '{}' of {} bytes is negative", r.purpose, r.bytes), r.device.str(),
                  "reserve zero or more bytes");
    auto& [bytes, purpose] = per_device[r.device];
    bytes += r.bytes;
    purpose += (purpose.empty() ? "" : " + ") + fmt::format("{} ({})", r.purpose, format_bytes(r.bytes));
  }
  for (const auto& [device, reserved] : per_device) {
    const auto& [bytes, purpose] = reserved;
    std::optional<int64_t> have = budget.get(device);
    if (!have)
      throw Error(fmt::format("{} is reserved on {}, which is not in the budget ({})", purpose, device.str(),
                              budget.describe()),
                  "reservations", "reserve on a device of max_memory, or add that device to max_memory");
    if (bytes > *have)
      throw Error(ErrorKind::OutOfMemory,
                  fmt::format("{} needs {} on {} but its budget is {}", purpose, format_bytes(bytes), device.str(),
                              format_bytes(*have)),
                  "reservations",
                  "raise max_memory for that device, shorten the context (smaller KV cache), or reserve elsewhere");
    budget.set(device, *have - bytes);
  }
  return budget;
}

void check_budget_can_fit(const ModuleSizes& sizes, const MaxMemory& budget, const PlanOptions& options) {
  int64_t capacity = 0;
  for (const auto& e : budget.entries())
    if (!e.device.is_disk()) capacity += e.bytes;
  if (sizes.total() <= capacity) return;
  std::string reserved;
  for (const auto& r : options.reservations)
    reserved += fmt::format("{}{} on {} for {}", reserved.empty() ? "" : ", ", format_bytes(r.bytes), r.device.str(),
                            r.purpose);
  throw Error(ErrorKind::OutOfMemory,
              fmt::format("the model needs {} ({} bytes{}) but the devices can hold only {} ({} bytes: {}){}; disk "
                          "offload is off",
                          format_bytes(sizes.total()), sizes.total(),
                          options.dtype ? fmt::format(" as {}", dtype_name(*options.dtype)) : "",
                          format_bytes(capacity), capacity, budget.describe(),
                          reserved.empty() ? "" : ", after reserving " + reserved),
              "infer_auto_device_map",
              "allow disk offload, raise max_memory, lower the reservations (a shorter context), or load in a "
              "smaller dtype");
}

}  // namespace ferry::detail

namespace ferry {

MaxMemory device_map_usage(const nn::Module& model, const DeviceMap& device_map, std::optional<DType> dtype,
                           const SpecialDTypes& special_dtypes) {
  std::map<Device, int64_t> bytes;
  for (const auto& [name, tensor] : nn::named_module_tensors(model, true, true)) {
    auto device = device_map.device_for(name);
    if (!device) continue;
    std::optional<DType> special;
    if (auto it = special_dtypes.find(name); it != special_dtypes.end()) special = it->second;
    bytes[*device] += planned_tensor_bytes(tensor.numel(), tensor.dtype(), dtype, special);
  }
  MaxMemory out;
  for (const auto& [device, n] : bytes) out.set(device, n);
  return out;
}

}  // namespace ferry
