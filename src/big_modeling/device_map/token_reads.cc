// What generation reads off the compute device, per token and per prompt (include/ferry/big_modeling/token_reads.h).
#include "ferry/big_modeling/token_reads.h"

#include <algorithm>
#include <unordered_set>

#include "ferry/big_modeling/module_sizes.h"

namespace ferry {

std::vector<TokenReads> per_token_reads(const nn::Module& model, const DeviceMap& map, Device compute,
                                        const ReadProfile& profile, std::optional<DType> dtype) {
  const ModuleSizes sizes = compute_module_sizes(model, dtype);
  std::unordered_set<std::string> experts, prompt(profile.prompt_modules.begin(), profile.prompt_modules.end());
  for (const auto& named : model.named_modules())
    if (std::find(profile.expert_classes.begin(), profile.expert_classes.end(), named.module->type_name()) !=
        profile.expert_classes.end())
      experts.insert(named.name);
  enum class Kind { Dense, Expert, Prompt };
  // An expert is read when a token routes to it, whatever entry holds it (dispatch hooks experts on their own). Any
  // other tensor is read with its device-map entry (the hook's unit): once per prompt when the entry is a prompt
  // module or lies inside one, else for every token — a prompt module inside a larger entry is read with it.
  auto inside = [](std::string name, const std::unordered_set<std::string>& modules, bool inclusive) {
    if (inclusive && modules.count(name)) return true;
    for (std::size_t dot = name.rfind('.'); dot != std::string::npos; dot = name.rfind('.')) {
      name.resize(dot);
      if (modules.count(name)) return true;
    }
    return false;
  };
  auto kind_of = [&](const std::string& tensor) {
    if (inside(tensor, experts, false)) return Kind::Expert;
    const std::optional<std::string> key = map.key_for(tensor);
    if (key && !key->empty() && inside(*key, prompt, true)) return Kind::Prompt;
    return Kind::Dense;
  };
  std::vector<TokenReads> rows = {{Device::disk()}, {Device::cpu()}};
  for (const auto& [name, t] : model.named_parameters()) {
    const std::optional<Device> d = map.device_for(name);
    if (!d || *d == compute || !(d->is_disk() || d->is_cpu())) continue;
    TokenReads& row = d->is_disk() ? rows[0] : rows[1];
    switch (kind_of(name)) {
      case Kind::Dense: row.dense_bytes += sizes[name]; break;
      case Kind::Expert: row.expert_bytes += sizes[name]; break;
      case Kind::Prompt: row.prompt_bytes += sizes[name]; break;
    }
  }
  std::vector<TokenReads> out;
  for (TokenReads& r : rows) {
    if (r.dense_bytes == 0 && r.expert_bytes == 0 && r.prompt_bytes == 0) continue;
    r.expected_bytes = static_cast<double>(r.dense_bytes) +
                       profile.routed_fraction * static_cast<double>(r.expert_bytes);
    out.push_back(r);
  }
  return out;
}

double token_read_bytes(const std::vector<TokenReads>& reads) {
  double total = 0;
  for (const TokenReads& r : reads) total += r.expected_bytes;
  return total;
}

}  // namespace ferry
