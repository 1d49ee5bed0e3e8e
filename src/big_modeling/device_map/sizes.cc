// Sizes for planning: compute_module_sizes, compute_module_total_buffer_size and get_max_layer_size, as Accelerate
// computes them (utils/modeling.py), from shapes and dtypes only so that meta models plan like loaded ones.
#include <algorithm>

#include "ferry/big_modeling/module_sizes.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_tensors.h"  // named_module_tensors

namespace ferry {

int64_t ModuleSizes::operator[](std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? 0 : entries_[it->second].second;
}

void ModuleSizes::add(const std::string& name, int64_t bytes) {
  auto [it, inserted] = index_.emplace(name, entries_.size());
  if (inserted)
    entries_.emplace_back(name, bytes);
  else
    entries_[it->second].second += bytes;
}

namespace {

// numel × dtype_byte_size, with bool's 1/8 byte rounded up to whole bytes per tensor (and quantized types counted
// in whole blocks).
int64_t bytes_of(int64_t numel, DType t) {
  if (t == DType::Bool) return (numel + 7) / 8;
  return static_cast<int64_t>(dtype_nbytes(t, numel));
}

}  // namespace

int64_t planned_tensor_bytes(int64_t numel, DType own, std::optional<DType> dtype, std::optional<DType> special) {
  if (special) return bytes_of(numel, *special);
  // Integer and bool tensors are never converted when loading (set_module_tensor_to_device), so they keep
  // their size; float tensors are only ever narrowed by a target dtype, never widened.
  if (!dtype || !is_floating_point(own)) return bytes_of(numel, own);
  return std::min(bytes_of(numel, *dtype), bytes_of(numel, own));
}

ModuleSizes compute_module_sizes(const nn::Module& model, std::optional<DType> dtype,
                                 const SpecialDTypes& special_dtypes, bool buffers_only) {
  nn::NamedTensors tensors = buffers_only ? model.named_buffers() : nn::named_module_tensors(model, true, true);
  ModuleSizes sizes;
  for (const auto& [name, tensor] : tensors) {
    std::optional<DType> special;
    if (auto it = special_dtypes.find(name); it != special_dtypes.end()) special = it->second;
    int64_t bytes = planned_tensor_bytes(tensor.numel(), tensor.dtype(), dtype, special);
    sizes.add("", bytes);
    for (std::size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
      sizes.add(name.substr(0, dot), bytes);
    sizes.add(name, bytes);
  }
  return sizes;
}

int64_t compute_module_total_buffer_size(const nn::Module& module, std::optional<DType> dtype,
                                         const SpecialDTypes& special_dtypes) {
  return compute_module_sizes(module, dtype, special_dtypes, /*buffers_only=*/true).total();
}

MaxLayer get_max_layer_size(const std::vector<PlanItem>& items, const ModuleSizes& sizes,
                            const std::vector<std::string>& no_split_module_classes) {
  MaxLayer best;
  // Depth-first in queue order, exactly as Accelerate walks it, so ties list names in the same order.
  std::vector<PlanItem> stack(items.rbegin(), items.rend());
  while (!stack.empty()) {
    PlanItem item = std::move(stack.back());
    stack.pop_back();
    const nn::Module* m = item.module;
    bool is_layer = m == nullptr || m->children().empty() ||
                    std::find(no_split_module_classes.begin(), no_split_module_classes.end(), m->type_name()) !=
                        no_split_module_classes.end();
    if (!is_layer) {
      const auto& children = m->children();
      for (auto it = children.rbegin(); it != children.rend(); ++it)
        stack.push_back(PlanItem{item.name + "." + it->name, it->module.get()});
      continue;
    }
    int64_t size = sizes[item.name];
    if (size > best.size) {
      best.size = size;
      best.names = {item.name};
    } else if (size == best.size) {
      best.names.push_back(item.name);
    }
  }
  return best;
}

}  // namespace ferry
