// get_balanced_memory and the device_map modes ("auto", "balanced", "balanced_low_0", "sequential") exactly as
// Accelerate's get_balanced_memory and load_checkpoint_and_dispatch resolve them.
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_map>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/nn/module.h"
#include "planner.h"

namespace ferry::detail {
namespace {

// Accelerate: get_module_leaves — names (not "") that are nobody's parent among `names`.
std::vector<std::string> module_leaves(const std::vector<std::string>& names) {
  std::unordered_map<std::string, int> children;
  for (const auto& n : names) {
    std::size_t dot = n.rfind('.');
    if (n.empty() || dot == std::string::npos) continue;
    ++children[n.substr(0, dot)];
  }
  std::vector<std::string> leaves;
  for (const auto& n : names)
    if (!n.empty() && children.count(n) == 0) leaves.push_back(n);
  return leaves;
}

// The size of the first module met (in size order) of each no-split class; the margin is the largest of them.
int64_t no_split_block_size(const nn::Module& model, const ModuleSizes& sizes,
                            const std::vector<std::string>& no_split_module_classes) {
  if (no_split_module_classes.empty()) return 0;
  std::set<std::string> wanted(no_split_module_classes.begin(), no_split_module_classes.end());
  std::unordered_map<std::string, int64_t> first;
  for (const auto& [name, size] : sizes.entries()) {
    if (name.empty()) continue;
    const nn::Module* m = model.find_submodule(name);
    if (m == nullptr) continue;  // a tensor name
    std::string cls = m->type_name();
    if (wanted.count(cls) && !first.count(cls)) first.emplace(cls, size);
    if (first.size() == wanted.size()) break;
  }
  int64_t out = 0;
  for (const auto& [cls, size] : first) out = std::max(out, size);
  return out;
}

// The mean size of the modules that own tensors directly (leaves once the tensor names are removed).
int64_t mean_leaf_module_size(const ModuleSizes& sizes) {
  std::vector<std::string> names;
  for (const auto& [name, size] : sizes.entries()) names.push_back(name);
  std::vector<std::string> tensor_leaves = module_leaves(names);
  std::set<std::string> drop(tensor_leaves.begin(), tensor_leaves.end());
  std::vector<std::string> modules;
  for (const auto& n : names)
    if (!drop.count(n)) modules.push_back(n);
  std::vector<std::string> leaves = module_leaves(modules);
  int64_t sum = 0;
  for (const auto& n : leaves) sum += sizes[n];
  // Python: int(sum / max(len, 1)) — a true division truncated.
  return static_cast<int64_t>(static_cast<double>(sum) / static_cast<double>(std::max<std::size_t>(leaves.size(), 1)));
}

}  // namespace

MaxMemory balance_budget(const nn::Module& model, MaxMemory budget, bool user_set,
                         const std::vector<std::string>& no_split_module_classes, std::optional<DType> dtype,
                         const SpecialDTypes& special_dtypes, bool low_zero) {
  std::vector<Device> gpus;  // accelerators with memory, in order
  for (const auto& e : budget.entries())
    if (e.device.is_accelerator() && e.bytes > 0) gpus.push_back(e.device);
  const std::size_t n = gpus.size();
  if (n == 0) return budget;
  if (n == 1) {
    low_zero = false;  // no other GPU to take the weights
    if (!user_set) {
      // Accelerate's only fraction: keep 10% of a lone GPU for activations and buffers.
      Device first = budget.accelerators().front();
      budget.set(first, static_cast<int64_t>(static_cast<double>(*budget.get(first)) * 0.9));
      log_info("We will use 90% of the memory on device {} for storing the model, and 10% for the buffer to avoid "
               "OOM. You can set `max_memory` in to a higher value to use more memory (at your own risk).",
               first.str());
    }
  }

  ModuleSizes sizes = compute_module_sizes(model, dtype, special_dtypes);
  int64_t per_gpu = sizes.total() / static_cast<int64_t>(low_zero ? n - 1 : n);
  // total/n alone is too small (each GPU would get slightly fewer layers and the rest would spill to the cpu), so
  // add a margin: 1.25 × the larger of a no-split block and the mean leaf module.
  int64_t margin = std::max(no_split_block_size(model, sizes, no_split_module_classes), mean_leaf_module_size(sizes));
  per_gpu += static_cast<int64_t>(1.25 * static_cast<double>(margin));

  // Accelerate uses GPU id 0 as "GPU 0" and sums ids 1..n-1, failing when ids are not contiguous; ferry takes the
  // first GPU of the budget and the others that have memory.
  Device gpu0 = budget.accelerators().front();
  for (std::size_t i = 0; i + 1 < n; ++i) {  // the last GPU keeps all of its memory, in case the margin is short
    int64_t current = *budget.get(gpus[i]);
    budget.set(gpus[i], (low_zero && gpus[i] == gpu0) ? current : std::min(per_gpu, current));
  }
  if (low_zero) {
    int64_t others = 0;
    for (Device g : gpus)
      if (g != gpu0) others += *budget.get(g);
    budget.set(gpu0, std::min(std::max<int64_t>(0, sizes.total() - others), *budget.get(gpu0)));
  }
  return budget;
}

}  // namespace ferry::detail

namespace ferry {

MaxMemory get_balanced_memory(const nn::Module& model, const std::optional<MaxMemory>& max_memory,
                              const std::vector<std::string>& no_split_module_classes, std::optional<DType> dtype,
                              const SpecialDTypes& special_dtypes, bool low_zero) {
  return detail::balance_budget(model, get_max_memory(max_memory), max_memory.has_value(), no_split_module_classes,
                                dtype, special_dtypes, low_zero);
}

DeviceMapMode parse_device_map_mode(std::string_view mode) {
  if (mode == "auto") return DeviceMapMode::Auto;
  if (mode == "balanced") return DeviceMapMode::Balanced;
  if (mode == "balanced_low_0") return DeviceMapMode::BalancedLow0;
  if (mode == "sequential") return DeviceMapMode::Sequential;
  if (mode == "fast") return DeviceMapMode::Fast;
  throw Error(fmt::format("unknown device_map mode '{}'", mode), "device_map",
              "choose 'auto', 'balanced', 'balanced_low_0', 'sequential' or 'fast', or give a device map");
}

std::string_view device_map_mode_name(DeviceMapMode mode) {
  switch (mode) {
    case DeviceMapMode::Auto: return "auto";
    case DeviceMapMode::Balanced: return "balanced";
    case DeviceMapMode::BalancedLow0: return "balanced_low_0";
    case DeviceMapMode::Sequential: return "sequential";
    case DeviceMapMode::Fast: return "fast";
  }
  return "?";
}

DeviceMap plan_device_map(const nn::Module& model, DeviceMapMode mode, const PlanOptions& options) {
  // load_checkpoint_and_dispatch: every mode but "sequential" balances the budget first.
  MaxMemory budget = detail::budget_after_reservations(get_max_memory(options.max_memory), options.reservations);
  if (mode != DeviceMapMode::Sequential)
    budget = detail::balance_budget(model, std::move(budget), options.max_memory.has_value(),
                                    options.no_split_module_classes, options.dtype, options.special_dtypes,
                                    mode == DeviceMapMode::BalancedLow0);
  if (mode != DeviceMapMode::Fast) return detail::infer_with_budget(model, budget, options);
  PlanOptions fast = options;
  fast.strategy = PlanStrategy::Fast;
  return detail::infer_with_budget(model, budget, fast);
}

}  // namespace ferry
