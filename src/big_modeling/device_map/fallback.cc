// fallback_allocation: when a device would be left empty because the next module is too big, look breadth-first
// (in Accelerate's order) for a submodule that fits, and move it to the front of the queue.
// Accelerate: fallback_allocate (utils/modeling.py).
#include "ferry/nn/module.h"
#include "planner.h"

namespace ferry::detail {
namespace {

// The search order Accelerate uses: a module that is too big is replaced by its direct parameters and children.
std::vector<PlanItem> search_children(const PlanItem& item) {
  std::vector<PlanItem> out;
  for (const auto& [name, slot] : item.module->named_parameter_slots(/*recurse=*/false))
    out.push_back({item.name + "." + name});
  for (const auto& child : item.module->children()) out.push_back({item.name + "." + child.name, child.module.get()});
  return out;
}

}  // namespace

std::optional<PlanItem> fallback_allocate(PlanQueue& queue, const ModuleSizes& sizes, int64_t size_limit,
                                          const std::vector<std::string>& no_split_module_classes,
                                          const TiedGroups& tied) {
  if (size_limit < 0) return std::nullopt;  // Accelerate: convert_file_size_to_int raises, caught as "none"
  PlanQueue search = queue;
  std::optional<std::string> found;
  while (!search.empty()) {
    PlanItem item = std::move(search.front());
    search.pop_front();
    auto ties = size_with_ties(outside_tied_params(item.name, tied), sizes[item.name], sizes, search);
    if (ties.size <= size_limit) {
      found = item.name;
      break;
    }
    if (!can_split(item, no_split_module_classes)) continue;
    auto children = search_children(item);
    search.insert(search.begin(), children.begin(), children.end());
  }
  if (!found) return std::nullopt;

  // Split every ancestor of the found item that is still queued, outermost first, so the item itself is queued.
  const std::string& name = *found;
  for (std::size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
    std::string parent = name.substr(0, dot);
    auto it = std::find_if(queue.begin(), queue.end(), [&](const PlanItem& i) { return i.name == parent; });
    if (it == queue.end() || it->module == nullptr) continue;
    // split_items keeps the parent's buffers, which Accelerate drops here too.
    auto children = split_items(*it);
    it = queue.erase(it);
    queue.insert(it, children.begin(), children.end());
  }
  auto it = std::find_if(queue.begin(), queue.end(), [&](const PlanItem& i) { return i.name == name; });
  if (it == queue.end()) return std::nullopt;  // cannot happen: the search only descends through queued items
  PlanItem out = *it;
  queue.erase(it);
  return out;
}

}  // namespace ferry::detail
