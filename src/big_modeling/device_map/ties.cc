// The planner's small verbs: whole-component containment, tied groups that cross a module's boundary, a
// module's size with the owners of its tied parameters (Accelerate: get_module_size_with_ties), and what a
// split replaces a module with.
#include <algorithm>

#include "ferry/big_modeling/device_map.h"
#include "ferry/nn/module.h"
#include "planner.h"

namespace ferry::detail {

bool is_inside(const std::string& name, const std::string& module) {
  // Accelerate's planner tests `name == module or name.startswith(module + ".")`: the root "" contains no name.
  return module.empty() ? name.empty() : module_covers(module, name);
}

std::vector<std::string> outside_tied_params(const std::string& name, const TiedGroups& tied) {
  std::vector<std::string> out;
  for (const auto& group : tied) {
    bool any_inside = false, all_inside = true;
    for (const auto& k : group) {
      bool inside = is_inside(k, name);
      any_inside |= inside;
      all_inside &= inside;
    }
    if (!any_inside || all_inside) continue;
    for (const auto& k : group)
      if (!is_inside(k, name)) out.push_back(k);
  }
  return out;
}

SizeWithTies size_with_ties(const std::vector<std::string>& tied_params, int64_t module_size,
                            const ModuleSizes& sizes, const PlanQueue& queue) {
  SizeWithTies out{module_size, {}};
  for (const auto& param : tied_params) {
    // Accelerate matches `param.startswith(n + ".")`; an owner that is the parameter itself (a split left it as
    // a queue item) counts too, where Accelerate would fail to find any owner.
    auto owner = std::find_if(queue.begin(), queue.end(), [&](const PlanItem& item) {
      return is_inside(param, item.name);
    });
    if (owner == queue.end()) continue;
    out.owners.push_back(*owner);
    out.size += sizes[owner->name] - sizes[param];
  }
  return out;
}

std::vector<PlanItem> split_items(const PlanItem& item) {
  std::vector<PlanItem> out;
  const nn::Module& m = *item.module;
  for (const auto& [name, slot] : m.named_parameter_slots(/*recurse=*/false)) out.push_back({item.name + "." + name});
  for (const auto& child : m.children()) out.push_back({item.name + "." + child.name, child.module.get()});
  // Accelerate drops the direct buffers here, so its plan never places them (#3956, #4014); ferry keeps them,
  // queued after the children as they are for the root.
  for (const auto& [name, slot] : m.named_buffer_slots(/*recurse=*/false)) out.push_back({item.name + "." + name});
  return out;
}

bool can_split(const PlanItem& item, const std::vector<std::string>& no_split_module_classes) {
  if (item.module == nullptr || item.module->children().empty()) return false;
  return std::find(no_split_module_classes.begin(), no_split_module_classes.end(), item.module->type_name()) ==
         no_split_module_classes.end();
}

}  // namespace ferry::detail
