// format_plan: the device map as a table (module, device, bytes, dtype) with per-device totals, budgets and
// reservations, so a plan can be read before a byte of the checkpoint is (DESIGN.md, big_modeling 17).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_tensors.h"  // named_module_tensors

namespace ferry {
namespace {

struct Row {
  int64_t bytes = 0;
  std::set<std::string> dtypes;
};

// The dtype a tensor will have once loaded: special_dtypes, else the target for float tensors, else its own.
DType loaded_dtype(const std::string& name, DType own, const PlanOptions& o) {
  if (auto it = o.special_dtypes.find(name); it != o.special_dtypes.end()) return it->second;
  if (o.dtype && is_floating_point(own)) return *o.dtype;  // loading casts every float tensor to the target
  return own;
}

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : "+") + n;
  return out;
}

}  // namespace

std::string format_plan(const nn::Module& model, const DeviceMap& device_map, const PlanOptions& options) {
  std::unordered_map<std::string, Row> rows;
  std::vector<std::string> uncovered;
  MaxMemory per_device;  // bytes per device, in planning order
  for (const auto& [name, tensor] : nn::named_module_tensors(model, true, true)) {
    auto key = device_map.key_for(name);
    if (!key) {
      uncovered.push_back(name);
      continue;
    }
    std::optional<DType> special;
    if (auto it = options.special_dtypes.find(name); it != options.special_dtypes.end()) special = it->second;
    int64_t bytes = planned_tensor_bytes(tensor.numel(), tensor.dtype(), options.dtype, special);
    Row& row = rows[*key];
    row.bytes += bytes;
    row.dtypes.insert(std::string(dtype_name(loaded_dtype(name, tensor.dtype(), options))));
    Device device = *device_map.at(*key);
    per_device.set(device, per_device.get(device).value_or(0) + bytes);
  }

  std::size_t width = 6;
  for (const auto& [key, device] : device_map) width = std::max(width, key.size());
  std::string out = fmt::format("{:<{}}  {:<8}  {:>12}  {}\n", "module", width, "device", "bytes", "dtype");
  for (const auto& [key, device] : device_map) {
    auto it = rows.find(key);
    Row row = it == rows.end() ? Row{} : it->second;
    out += fmt::format("{:<{}}  {:<8}  {:>12}  {}\n", key.empty() ? "(all)" : key, width, device.str(),
                       format_bytes(row.bytes), row.dtypes.empty() ? "-" : join(row.dtypes));
  }

  std::map<Device, std::pair<int64_t, std::string>> reserved;
  for (const auto& r : options.reservations) {
    auto& [bytes, what] = reserved[r.device];
    bytes += r.bytes;
    what += (what.empty() ? "" : ", ") + r.purpose;
  }
  for (const auto& [device, bytes] : per_device.entries()) {
    out += fmt::format("{}: {} of weights", device.str(), format_bytes(bytes));
    if (auto it = reserved.find(device); it != reserved.end())
      out += fmt::format(" + {} reserved ({})", format_bytes(it->second.first), it->second.second);
    if (options.max_memory && options.max_memory->get(device) && !device.is_disk())
      out += fmt::format(" of {}", format_bytes(*options.max_memory->get(device)));
    out += "\n";
  }
  if (!uncovered.empty()) {
    out += fmt::format("no device for {} tensor(s):", uncovered.size());
    for (std::size_t i = 0; i < uncovered.size() && i < 10; ++i) out += " " + uncovered[i];
    out += uncovered.size() > 10 ? " ...\n" : "\n";
  }
  return out;
}

}  // namespace ferry
