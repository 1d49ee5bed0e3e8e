// check_device_map: every tensor of the state_dict must have a device, and every key should name something.
// Accelerate: check_device_map. Unlike Accelerate, a key may also name a tensor (infer_auto_device_map produces
// such keys when it splits a module with direct parameters) and module names include shared submodules under
// each of their names, so neither draws a spurious warning.
#include <fmt/format.h>

#include <unordered_set>

#include "ferry/big_modeling/device_map.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_tensors.h"

namespace ferry {
namespace {

constexpr std::size_t kNamesShown = 10;

std::string first_names(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kNamesShown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kNamesShown) out += fmt::format(" ... and {} more", names.size() - kNamesShown);
  return out;
}

}  // namespace

void check_device_map(const nn::Module& model, const DeviceMap& device_map) {
  std::unordered_set<std::string> known;
  for (const auto& m : model.named_modules(/*remove_duplicate=*/false)) known.insert(m.name);
  for (const auto& [name, tensor] : nn::named_module_tensors(model, true, true)) known.insert(name);
  std::vector<std::string> unknown;
  for (const auto& [key, device] : device_map)
    if (!key.empty() && !known.count(key)) unknown.push_back(key);
  if (!unknown.empty())
    log_warning("The following device_map keys do not match any submodules in the model: {}", first_names(unknown));

  std::vector<std::string> uncovered;
  for (const auto& [name, tensor] : model.state_dict())
    if (!device_map.key_for(name)) uncovered.push_back(name);
  if (!uncovered.empty())
    throw Error(fmt::format("The device_map provided does not give any device for the following parameters: {}",
                            first_names(uncovered)),
                "device_map", "add entries for these modules (or an entry \"\" for the whole model)");
}

}  // namespace ferry
