// split_out_modules (auto_device_map.h): the entries of a device map opened up so that given modules are entries of
// their own — what place_experts does before it moves experts.
#include <unordered_set>

#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/nn/module_tensors.h"

namespace ferry {
namespace {

std::string join(const std::string& parent, const std::string& child) {
  return parent.empty() ? child : parent + "." + child;
}

// The entry `name` on `device`, split down until no module of `wanted` lies strictly below an entry; `holders` are
// the strict ancestors of the wanted modules ("" among them).
void expand(const nn::Module& model, const std::string& name, Device device,
            const std::unordered_set<std::string>& holders, DeviceMap& out) {
  const nn::Module* m = name.empty() ? &model : model.find_submodule(name);
  if (m == nullptr || !holders.count(name)) {
    out.set(name, device);
    return;
  }
  for (const auto& [tensor, t] : nn::named_module_tensors(*m)) out.set(join(name, tensor), device);
  for (const auto& child : m->children()) expand(model, join(name, child.name), device, holders, out);
}

}  // namespace

DeviceMap split_out_modules(const nn::Module& model, const DeviceMap& map, const std::vector<std::string>& modules) {
  std::unordered_set<std::string> holders;
  for (const std::string& m : modules) {
    if (m.empty()) continue;
    holders.insert("");
    for (std::size_t dot = m.find('.'); dot != std::string::npos; dot = m.find('.', dot + 1))
      holders.insert(m.substr(0, dot));
  }
  DeviceMap out;
  for (const auto& [name, device] : map) expand(model, name, device, holders, out);
  return out;
}

}  // namespace ferry
