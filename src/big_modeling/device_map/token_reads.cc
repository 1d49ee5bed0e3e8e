// What generation reads off the compute device, per token and per prompt (include/ferry/big_modeling/token_reads.h).
#include "ferry/big_modeling/token_reads.h"

#include <algorithm>
#include <unordered_set>

#include "ferry/big_modeling/experts.h"  // expert_module_names
#include "ferry/big_modeling/module_sizes.h"

#include "ferry/nn/tied.h"

namespace ferry {

std::vector<std::string> row_lookup_tables(const nn::Module& model) {
  std::unordered_set<std::string> looked_up;
  for (const nn::NamedModule& m : model.named_modules()) {
    const std::string_view table = m.module->row_lookup_parameter();
    if (!table.empty() && m.module->has_parameter(table))
      looked_up.insert(m.name.empty() ? std::string(table) : m.name + "." + std::string(table));
  }
  // A tied group is read by the row only when every name of it is a looked-up table (T5's shared embedding), not
  // when one is an lm_head.
  for (const auto& group : nn::find_tied_parameters(model))
    if (!std::all_of(group.begin(), group.end(), [&](const std::string& n) { return looked_up.count(n) > 0; }))
      for (const std::string& n : group) looked_up.erase(n);
  std::vector<std::string> out(looked_up.begin(), looked_up.end());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<TokenReads> per_token_reads(const nn::Module& model, const DeviceMap& map, Device compute,
                                        const ReadProfile& profile, std::optional<DType> dtype) {
  const ModuleSizes sizes = compute_module_sizes(model, dtype);
  const std::vector<std::string> expert_names = expert_module_names(model, profile.expert_classes);
  const std::unordered_set<std::string> experts(expert_names.begin(), expert_names.end()),
      prompt(profile.prompt_modules.begin(), profile.prompt_modules.end());
  const std::vector<std::string> table_names = row_lookup_tables(model);
  const std::unordered_set<std::string> tables(table_names.begin(), table_names.end());
  enum class Kind { Dense, Expert, Prompt };
  // Offloaded weights are read by the module that uses them, when it runs (dispatch hooks every module with weights
  // of an offloaded entry, as Accelerate does; an expert is loaded whole): a tensor counts as its innermost enclosing
  // expert or prompt module's.
  auto kind_of = [&](std::string prefix) {
    for (std::size_t dot = prefix.rfind('.'); dot != std::string::npos; dot = prefix.rfind('.')) {
      prefix.resize(dot);
      if (experts.count(prefix)) return Kind::Expert;
      if (prompt.count(prefix)) return Kind::Prompt;
    }
    return Kind::Dense;
  };
  std::vector<TokenReads> rows = {{Device::disk()}, {Device::cpu()}};
  for (const auto& [name, t] : model.named_parameters()) {
    const std::optional<Device> d = map.device_for(name);
    if (!d || *d == compute || !(d->is_disk() || d->is_cpu())) continue;
    TokenReads& row = d->is_disk() ? rows[0] : rows[1];
    const Kind kind = kind_of(name);
    if (kind == Kind::Dense && tables.count(name)) {
      row.table_bytes += sizes[name];
      if (t.dim() >= 1 && t.size(0) > 0) row.table_row_bytes += sizes[name] / t.size(0);
      continue;
    }
    switch (kind) {
      case Kind::Dense: row.dense_bytes += sizes[name]; break;
      case Kind::Expert: row.expert_bytes += sizes[name]; break;
      case Kind::Prompt: row.prompt_bytes += sizes[name]; break;
    }
  }
  std::vector<TokenReads> out;
  for (TokenReads& r : rows) {
    if (r.dense_bytes == 0 && r.expert_bytes == 0 && r.prompt_bytes == 0 && r.table_bytes == 0) continue;
    r.expected_bytes = static_cast<double>(r.dense_bytes) +
                       profile.routed_fraction * static_cast<double>(r.expert_bytes) +
                       static_cast<double>(r.table_row_bytes);
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
