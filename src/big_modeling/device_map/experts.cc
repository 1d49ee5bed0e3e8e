// Device maps of mixtures of experts (include/ferry/big_modeling/experts.h).
#include "ferry/big_modeling/experts.h"

#include <algorithm>
#include <cstdlib>
#include <unordered_set>

#include "ferry/big_modeling/module_sizes.h"
#include "ferry/nn/module_tensors.h"

namespace ferry {
namespace {

bool is_expert(const nn::Module& m, const std::vector<std::string>& classes) {
  return std::find(classes.begin(), classes.end(), m.type_name()) != classes.end();
}

// Experts by their bytes: all of them, the largest, and the layers they are in (one list of experts per layer).
struct ExpertBytes {
  int64_t total = 0, largest = 0;
  std::unordered_set<std::string> layers;
  // The least cache that keeps anything: one expert per layer (the cache keeps a share per layer,
  // io/weights_cache.h); below it nothing comes back before it is evicted.
  int64_t one_per_layer() const { return largest * static_cast<int64_t>(layers.size()); }
};

ExpertBytes expert_bytes(const std::vector<std::string>& experts, const ModuleSizes& sizes) {
  ExpertBytes b;
  for (const std::string& e : experts) {
    b.total += sizes[e];
    b.largest = std::max(b.largest, sizes[e]);
    b.layers.insert(e.substr(0, e.rfind('.')));
  }
  return b;
}

}  // namespace

std::vector<std::string> expert_module_names(const nn::Module& model, const std::vector<std::string>& expert_classes) {
  std::vector<std::string> out;
  for (const auto& named : model.named_modules())
    if (is_expert(*named.module, expert_classes)) out.push_back(named.name);
  return out;
}

DeviceMap place_experts(const nn::Module& model, const DeviceMap& map, const std::vector<std::string>& expert_classes,
                        const std::function<std::optional<Device>(const std::string& expert)>& where) {
  const std::vector<std::string> experts = expert_module_names(model, expert_classes);
  DeviceMap expanded = split_out_modules(model, map, experts);
  for (const std::string& expert : experts)
    if (const std::optional<Device> d = where(expert)) expanded.set(expert, *d);
  return clean_device_map(expanded);
}

std::optional<int64_t> expert_layer(const std::string& expert, const std::string& layers_prefix) {
  if (expert.size() <= layers_prefix.size() + 1 || expert.compare(0, layers_prefix.size(), layers_prefix) != 0 ||
      expert[layers_prefix.size()] != '.')
    return std::nullopt;
  const std::size_t start = layers_prefix.size() + 1, end = expert.find('.', start);
  const std::string digits = expert.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::strtoll(digits.c_str(), nullptr, 10);
}

int64_t unplanned_budget(const nn::Module& model, const DeviceMap& map, const PlanOptions& options, Device device) {
  const std::optional<int64_t> budget = get_max_memory(options.max_memory).get(device);
  if (!budget) return 0;
  int64_t left = *budget - device_map_usage(model, map, options.dtype, options.special_dtypes).get(device).value_or(0);
  for (const Reservation& r : options.reservations)
    if (r.device == device) left -= r.bytes;
  return std::max<int64_t>(left, 0);
}

int64_t expert_cache_reservation(const nn::Module& model, const PlanOptions& options,
                                 const std::vector<std::string>& expert_classes, int64_t experts_per_token) {
  if (expert_classes.empty() || experts_per_token <= 0) return 0;
  const MaxMemory budget = get_max_memory(options.max_memory);
  for (const auto& e : budget.entries())
    if (e.device.is_accelerator() && e.bytes > 0) return 0;  // experts on a GPU first: not modelled here
  const std::optional<int64_t> cpu = budget.get(Device::cpu());
  const std::vector<std::string> experts = expert_module_names(model, expert_classes);
  if (!cpu || experts.empty()) return 0;
  const ModuleSizes sizes = compute_module_sizes(model, options.dtype, options.special_dtypes);
  const ExpertBytes b = expert_bytes(experts, sizes);
  int64_t room = *cpu - (sizes[""] - b.total);
  for (const Reservation& r : options.reservations)
    if (r.device.is_cpu()) room -= r.bytes;
  if (b.total <= room) return 0;  // every expert fits in RAM: none is read from disk
  if (room < b.one_per_layer()) return 0;
  return std::min(room / 4 * 3, 2 * experts_per_token * b.one_per_layer());  // twice a token's working set
}

int64_t default_expert_cache_bytes(const nn::Module& model, const DeviceMap& map, const PlanOptions& options,
                                   const std::vector<std::string>& expert_classes) {
  if (expert_classes.empty()) return 0;
  int64_t on_disk = 0;
  for (const TokenReads& r : per_token_reads(model, map, Device::meta(), {expert_classes}, options.dtype))
    if (r.device.is_disk()) on_disk = r.expert_bytes;
  if (on_disk == 0) return 0;
  std::vector<std::string> experts_on_disk;
  for (const std::string& e : expert_module_names(model, expert_classes))
    if (const auto d = map.device_for(e); d && d->is_disk()) experts_on_disk.push_back(e);
  const ExpertBytes b = expert_bytes(experts_on_disk,
                                     compute_module_sizes(model, options.dtype, options.special_dtypes));
  const int64_t room = std::min(on_disk, unplanned_budget(model, map, options, Device::cpu()));
  return room < b.one_per_layer() ? 0 : room;  // every miss would be copied for nothing
}

}  // namespace ferry
