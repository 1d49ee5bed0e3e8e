// with_tied_names (see include/ferry/big_modeling/tied_weights.h).
#include "ferry/big_modeling/tied_weights.h"

#include "ferry/nn/tied.h"

namespace ferry {

std::shared_ptr<const io::WeightsMap> with_tied_names(const nn::Module& model,
                                                      std::shared_ptr<const io::WeightsMap> weights_map) {
  if (!weights_map) return weights_map;
  std::map<std::string, std::string> aliases;
  for (const auto& group : nn::find_tied_parameters(model)) {
    const std::string* stored = nullptr;
    for (const auto& name : group)
      if (weights_map->contains(name)) {
        stored = &name;
        break;
      }
    if (!stored) continue;  // not offloaded through this map (or missing: get() names it)
    for (const auto& name : group)
      if (!weights_map->contains(name)) aliases.emplace(name, *stored);
  }
  if (aliases.empty()) return weights_map;
  return std::make_shared<io::AliasedWeightsMap>(std::move(weights_map), std::move(aliases));
}

}  // namespace ferry
