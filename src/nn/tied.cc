// Tied parameters (Accelerate's find_tied_parameters / retie_parameters): names that share one TensorSlot.
#include "ferry/nn/tied.h"

#include <algorithm>
#include <map>

#include "ferry/core/error.h"
#include "ferry/nn/module_tensors.h"

namespace ferry::nn {

std::vector<std::vector<std::string>> find_tied_parameters(const Module& model) {
  // Every name of every slot (no de-duplication of modules or slots), grouped by slot in first-seen order.
  std::map<const TensorSlot*, std::vector<std::string>> names_by_slot;
  std::vector<const TensorSlot*> order;
  for (const auto& [name, slot] : model.named_parameter_slots(/*recurse=*/true, /*remove_duplicate=*/false)) {
    auto& names = names_by_slot[slot.get()];
    if (names.empty()) order.push_back(slot.get());
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  std::vector<std::vector<std::string>> groups;
  for (const TensorSlot* slot : order) {
    auto& names = names_by_slot[slot];
    if (names.size() < 2) continue;
    std::sort(names.begin(), names.end());
    groups.push_back(std::move(names));
  }
  std::sort(groups.begin(), groups.end());
  return groups;
}

void retie_parameters(Module& model, const std::vector<std::vector<std::string>>& tied_params) {
  for (const auto& group : tied_params) {
    std::shared_ptr<TensorSlot> keep;
    for (const auto& name : group) {
      auto [owner, local] = resolve_tensor_owner(model, name);
      const auto* slot = owner->find_parameter_slot(local);
      if (slot == nullptr)
        throw Error("\"" + name + "\" is a buffer, not a parameter", name, "only parameters can be tied");
      if (!keep && !(*slot)->tensor.is_meta()) keep = *slot;
    }
    if (!keep) continue;
    for (const auto& name : group) {
      auto [owner, local] = resolve_tensor_owner(model, name);
      owner->register_parameter(local, keep);
    }
  }
}

}  // namespace ferry::nn
