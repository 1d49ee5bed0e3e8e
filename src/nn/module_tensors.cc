// Tensors of a module tree by dotted name: Accelerate's set_module_tensor_to_device (utils/modeling.py), with the
// replacement made inside the shared slot so ties survive; named_module_tensors and get_non_persistent_buffers.
#include "ferry/nn/module_tensors.h"

#include "ferry/core/error.h"

namespace ferry::nn {

namespace {

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

std::string owner_label(const Module& m, std::string_view path) {
  return m.type_name() + (path.empty() ? std::string() : " \"" + std::string(path) + "\"");
}

const std::shared_ptr<TensorSlot>* local_slot(const Module& m, std::string_view name) noexcept {
  if (const auto* s = m.find_parameter_slot(name)) return s;
  return m.find_buffer_slot(name);
}

// Accelerate's tied_params_map lookups (see set_module_tensor_to_device there).
const Tensor* tied_lookup(const TiedParamsMap* map, const Tensor& t, Device device) {
  if (map == nullptr || !t.defined()) return nullptr;
  const void* key = tensor_data_ptr(t);
  if (key == nullptr) return nullptr;
  auto it = map->find(key);
  if (it == map->end()) return nullptr;
  auto jt = it->second.find(device);
  return jt == it->second.end() ? nullptr : &jt->second;
}

bool tied_record(TiedParamsMap* map, const Tensor& t, Device device, const Tensor& placed) {
  if (map == nullptr || !t.defined()) return false;
  const void* key = tensor_data_ptr(t);
  if (key == nullptr) return false;
  auto it = map->find(key);
  if (it == map->end() || it->second.count(device)) return false;
  it->second.emplace(device, placed);
  return true;
}

}  // namespace

const void* tensor_data_ptr(const Tensor& t) noexcept {
  if (!t.defined() || t.storage()->data() == nullptr) return nullptr;
  return static_cast<const char*>(t.storage()->data()) + t.byte_offset();
}

std::optional<Device> first_parameter_device(const Module& module) noexcept {
  for (const auto& p : module.own_parameters())
    if (p.slot) return p.slot->tensor.device();
  for (const auto& child : module.children())
    if (auto d = first_parameter_device(*child.module)) return d;
  return std::nullopt;
}

std::pair<Module*, std::string> resolve_tensor_owner(const Module& root, std::string_view name) {
  const auto dot = name.rfind('.');
  const std::string_view path = dot == std::string_view::npos ? std::string_view() : name.substr(0, dot);
  std::string local(dot == std::string_view::npos ? name : name.substr(dot + 1));
  Module& owner = root.get_submodule(path);
  if (local_slot(owner, local) == nullptr)
    throw Error(owner_label(owner, path) + " does not have a parameter or a buffer named " + local + ".",
                std::string(name), "compare the name with the model's named_parameters() / named_buffers()");
  return {&owner, std::move(local)};
}

const Tensor& get_module_tensor(const Module& root, std::string_view name) {
  auto [owner, local] = resolve_tensor_owner(root, name);
  return (*local_slot(*owner, local))->tensor;
}

std::shared_ptr<TensorSlot> find_tensor_slot(const Module& root, std::string_view name) noexcept {
  const auto dot = name.rfind('.');
  const Module* owner = dot == std::string_view::npos ? &root : root.find_submodule(name.substr(0, dot));
  if (owner == nullptr) return nullptr;
  const auto* slot = local_slot(*owner, dot == std::string_view::npos ? name : name.substr(dot + 1));
  return slot ? *slot : nullptr;
}

void set_module_tensor_to_device(Module& module, std::string_view tensor_name, Device device, const Tensor& value,
                                 std::optional<DType> dtype, TiedParamsMap* tied_params_map) {
  auto [owner, local] = resolve_tensor_owner(module, tensor_name);
  TensorSlot& slot = **local_slot(*owner, local);
  const Tensor old = slot.tensor;
  const std::string where(tensor_name);

  // A tied tensor already placed on `device` (by another module's hook) is reused, not copied again.
  const Tensor* placed = tied_lookup(tied_params_map, value, device);
  if (placed == nullptr) placed = tied_lookup(tied_params_map, old, device);
  if (placed != nullptr) {
    slot.tensor = *placed;
    return;
  }

  if (old.is_meta() && !device.is_meta() && !value.defined())
    throw Error(local + " is on the meta device, we need a `value` to put in on " + device.str() + ".", where,
                "load the weight from its checkpoint or offload folder and pass it as value");

  Tensor placed_value;
  try {
    if (value.defined()) {
      if (value.shape() != old.shape())
        throw Error("Trying to set a tensor of shape " + shape_str(value.shape()) + " in \"" + local +
                        "\" (which has shape " + shape_str(old.shape()) + "), this looks incorrect.",
                    where, "are the checkpoint and the model configuration from the same model?");
      // Like PyTorch's load_state_dict, cast to the existing dtype; an explicit dtype never touches integers.
      // A quantized slot (big_modeling/quantize.h) keeps its dtype: float values are quantized into it.
      DType target = value.dtype();
      if (!dtype || (is_quantized(old.dtype()) && is_floating_point(value.dtype()))) target = old.dtype();
      else if (is_floating_point(value.dtype())) target = *dtype;
      placed_value = value.to(device, target);
    } else {
      // Accelerate applies `dtype` here only when the target is meta; ferry casts for every device.
      const DType target = dtype && is_floating_point(old.dtype()) ? *dtype : old.dtype();
      placed_value = old.to(device, target);
    }
  } catch (const Error& e) {
    if (e.where() == where) throw;
    throw e.with_context(where);
  }
  slot.tensor = placed_value;

  if (!tied_record(tied_params_map, old, device, placed_value) && value.defined())
    tied_record(tied_params_map, value, device, placed_value);
}

std::set<std::string> get_non_persistent_buffers(const Module& module, bool recurse, bool fqns) {
  std::set<std::string> out;
  for (const auto& b : module.own_buffers())
    if (!b.persistent) out.insert(b.name);
  if (!recurse) return out;
  for (const auto& [prefix, m] : module.named_modules())
    for (const auto& b : m->own_buffers())
      if (!b.persistent) out.insert(fqns ? join(prefix, b.name) : b.name);
  return out;
}

NamedTensors named_module_tensors(const Module& module, bool include_buffers, bool recurse,
                                  bool remove_non_persistent) {
  NamedTensors out = module.named_parameters(recurse);
  if (!include_buffers) return out;
  // named_buffers' walk, keeping each entry's owner so persistence is judged where the buffer was registered.
  const std::vector<NamedModule> modules =
      recurse ? module.named_modules() : std::vector<NamedModule>{{"", const_cast<Module*>(&module)}};
  std::set<const TensorSlot*> seen;
  for (const auto& [prefix, m] : modules) {
    for (const auto& b : m->own_buffers()) {
      if (!seen.insert(b.slot.get()).second) continue;
      if (remove_non_persistent && !b.persistent) continue;
      out.emplace_back(join(prefix, b.name), b.slot->tensor);
    }
  }
  return out;
}

}  // namespace ferry::nn
