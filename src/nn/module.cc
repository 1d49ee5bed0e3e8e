// Module: registration of parameters, buffers and children; lookups by name; PyTorch's tree walks
// (named_modules / named_parameters / named_buffers / state_dict) with their exact order and de-duplication;
// whole-tree moves; and operator(), which runs the attached hook around forward.
#include "ferry/nn/module.h"

#include <algorithm>
#include <unordered_set>

#include "ferry/core/error.h"
#include "ferry/nn/empty_weights.h"
#include "ferry/nn/hooks.h"

namespace ferry::nn {

namespace {

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

template <class Entries>
std::string list_names(const Entries& entries) {
  std::string out;
  for (const auto& e : entries) out += (out.empty() ? "" : ", ") + e.name;
  return out.empty() ? "none" : out;
}

template <class Entries>
auto find_entry(Entries& entries, std::string_view name) {
  return std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.name == name; });
}

}  // namespace

Module::~Module() = default;

Value Module::forward(const Args& args) {
  (void)args;
  throw Error(type_name() + " has no forward", type_name(), "call its submodules instead");
}

Value Module::operator()(Args args) {
  // Keep the hook alive for the whole call, even if the forward replaces or removes it.
  const std::shared_ptr<ModelHook> hook = hook_;
  if (!hook) return forward(args);
  try {
    // A module that runs elsewhere (another rank) neither loads its weights nor runs here.
    if (std::optional<Value> replaced = hook->replace_forward(*this, args)) return std::move(*replaced);
    Args rewritten = hook->pre_forward(*this, std::move(args));
    Value output = forward(rewritten);
    return hook->post_forward(*this, std::move(output));
  } catch (...) {
    hook->forward_failed(*this);
    throw;
  }
}

Tensor Module::operator()(const Tensor& x) { return (*this)(Args{x}).tensor(); }

// ---- registration ------------------------------------------------------------------------------------------

void Module::check_new_name(const std::string& name, const char* what) const {
  const std::string where = type_name();
  if (name.empty()) throw Error(std::string("empty ") + what + " name", where);
  if (name.find('.') != std::string::npos)
    throw Error(std::string(what) + " name \"" + name + "\" contains '.'", where,
                "register it on the submodule that owns it");
  const bool is_param = std::string_view(what) == "parameter";
  const bool is_buffer = std::string_view(what) == "buffer";
  const bool is_module = std::string_view(what) == "module";
  if (!is_param && has_parameter(name))
    throw Error(std::string("cannot add ") + what + " \"" + name + "\": a parameter has that name", where);
  if (!is_buffer && has_buffer(name))
    throw Error(std::string("cannot add ") + what + " \"" + name + "\": a buffer has that name", where);
  if (!is_module && child(name) != nullptr)
    throw Error(std::string("cannot add ") + what + " \"" + name + "\": a submodule has that name", where);
}

void Module::set_slot(std::vector<NamedSlot>& list, std::string name, std::shared_ptr<TensorSlot> slot,
                      bool persistent) {
  auto it = find_entry(list, name);
  if (it != list.end()) {
    it->slot = std::move(slot);
    it->persistent = persistent;
  } else {
    list.push_back(NamedSlot{std::move(name), std::move(slot), persistent});
  }
}

void Module::register_parameter(std::string name, Tensor tensor) {
  check_new_name(name, "parameter");
  if (!tensor.defined())
    throw Error("parameter \"" + name + "\" is an undefined tensor", type_name(),
                "leave an absent parameter (a missing bias) unregistered");
  if (auto device = parameter_init_device()) tensor = tensor.to(*device);
  set_slot(params_, std::move(name), std::make_shared<TensorSlot>(TensorSlot{std::move(tensor)}), true);
}

void Module::register_parameter(std::string name, Shape shape, DType dtype, const TensorInit& init) {
  check_new_name(name, "parameter");
  const Device device = parameter_init_device().value_or(Device::cpu());
  Tensor tensor = make_tensor(shape, dtype, device, init);
  set_slot(params_, std::move(name), std::make_shared<TensorSlot>(TensorSlot{std::move(tensor)}), true);
}

void Module::register_parameter(std::string name, std::shared_ptr<TensorSlot> slot) {
  check_new_name(name, "parameter");
  if (!slot || !slot->tensor.defined())
    throw Error("cannot tie parameter \"" + name + "\" to an empty slot", type_name());
  set_slot(params_, std::move(name), std::move(slot), true);
}

void Module::register_buffer(std::string name, Tensor tensor, bool persistent) {
  check_new_name(name, "buffer");
  if (!tensor.defined()) throw Error("buffer \"" + name + "\" is an undefined tensor", type_name());
  if (auto device = buffer_init_device()) tensor = tensor.to(*device);
  set_slot(buffers_, std::move(name), std::make_shared<TensorSlot>(TensorSlot{std::move(tensor)}), persistent);
}

void Module::register_buffer(std::string name, Shape shape, DType dtype, const TensorInit& init, bool persistent) {
  check_new_name(name, "buffer");
  const Device device = buffer_init_device().value_or(Device::cpu());
  Tensor tensor = make_tensor(shape, dtype, device, init);
  set_slot(buffers_, std::move(name), std::make_shared<TensorSlot>(TensorSlot{std::move(tensor)}), persistent);
}

void Module::register_module_impl(std::string name, std::shared_ptr<Module> module) {
  check_new_name(name, "module");
  if (!module) throw Error("submodule \"" + name + "\" is null", type_name());
  auto it = find_entry(children_, name);
  if (it != children_.end()) {
    it->module = std::move(module);
  } else {
    children_.push_back(NamedChild{std::move(name), std::move(module)});
  }
}

// ---- direct members ----------------------------------------------------------------------------------------

const std::shared_ptr<TensorSlot>* Module::find_parameter_slot(std::string_view name) const noexcept {
  auto it = find_entry(params_, name);
  return it == params_.end() ? nullptr : &it->slot;
}

const std::shared_ptr<TensorSlot>* Module::find_buffer_slot(std::string_view name) const noexcept {
  auto it = find_entry(buffers_, name);
  return it == buffers_.end() ? nullptr : &it->slot;
}

const std::shared_ptr<TensorSlot>& Module::parameter_slot(std::string_view name) const {
  if (const auto* slot = find_parameter_slot(name)) return *slot;
  throw Error("no parameter \"" + std::string(name) + "\" (parameters: " + list_names(params_) + ")", type_name());
}

const Tensor& Module::parameter(std::string_view name) const { return parameter_slot(name)->tensor; }

const Tensor& Module::buffer(std::string_view name) const {
  if (const auto* slot = find_buffer_slot(name)) return (*slot)->tensor;
  throw Error("no buffer \"" + std::string(name) + "\" (buffers: " + list_names(buffers_) + ")", type_name());
}

const Tensor& Module::tensor(std::string_view name) const {
  if (const auto* slot = find_parameter_slot(name)) return (*slot)->tensor;
  if (const auto* slot = find_buffer_slot(name)) return (*slot)->tensor;
  throw Error("no parameter or buffer \"" + std::string(name) + "\" (parameters: " + list_names(params_) +
                  "; buffers: " + list_names(buffers_) + ")",
              type_name());
}

bool Module::is_persistent_buffer(std::string_view name) const {
  auto it = find_entry(buffers_, name);
  if (it == buffers_.end())
    throw Error("no buffer \"" + std::string(name) + "\" (buffers: " + list_names(buffers_) + ")", type_name());
  return it->persistent;
}

Module* Module::child(std::string_view name) const noexcept {
  auto it = find_entry(children_, name);
  return it == children_.end() ? nullptr : it->module.get();
}

Module* Module::find_submodule(std::string_view dotted_name) const noexcept {
  const Module* m = this;
  std::string_view rest = dotted_name;
  while (!rest.empty() && m != nullptr) {
    const auto dot = rest.find('.');
    m = m->child(rest.substr(0, dot));
    rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
  }
  return const_cast<Module*>(m);
}

Module& Module::get_submodule(std::string_view dotted_name) const {
  const Module* m = this;
  std::string path;
  std::string_view rest = dotted_name;
  while (!rest.empty()) {
    const auto dot = rest.find('.');
    const std::string_view part = rest.substr(0, dot);
    Module* next = m->child(part);
    if (next == nullptr)
      throw Error(m->type_name() + (path.empty() ? "" : " \"" + path + "\"") + " has no submodule \"" +
                      std::string(part) + "\" (children: " + list_names(m->children_) + ")",
                  std::string(dotted_name), "check the module name against named_modules()");
    path = join(path, std::string(part));
    m = next;
    rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
  }
  return const_cast<Module&>(*m);
}

// ---- tree walks --------------------------------------------------------------------------------------------

namespace {

void walk_modules(const Module* m, const std::string& prefix, bool remove_duplicate,
                  std::unordered_set<const Module*>& memo, std::vector<NamedModule>& out) {
  if (remove_duplicate && !memo.insert(m).second) return;
  out.push_back(NamedModule{prefix, const_cast<Module*>(m)});
  for (const auto& c : m->children()) walk_modules(c.module.get(), join(prefix, c.name), remove_duplicate, memo, out);
}

// PyTorch's Module._named_members: for each module, its members; a member seen before is skipped when
// remove_duplicate (by slot identity, like `v in memo` on Parameter objects).
NamedSlots named_members(const Module& root, bool recurse, bool remove_duplicate, bool buffers) {
  std::vector<NamedModule> modules =
      recurse ? root.named_modules(remove_duplicate) : std::vector<NamedModule>{{"", const_cast<Module*>(&root)}};
  std::unordered_set<const TensorSlot*> memo;
  NamedSlots out;
  for (const auto& [prefix, module] : modules) {
    for (const auto& e : buffers ? module->own_buffers() : module->own_parameters()) {
      if (memo.count(e.slot.get())) continue;
      if (remove_duplicate) memo.insert(e.slot.get());
      out.emplace_back(join(prefix, e.name), e.slot);
    }
  }
  return out;
}

NamedTensors to_tensors(const NamedSlots& slots) {
  NamedTensors out;
  out.reserve(slots.size());
  for (const auto& [name, slot] : slots) out.emplace_back(name, slot->tensor);
  return out;
}

void add_state_dict(const Module& m, const std::string& prefix, NamedTensors& out) {
  for (const auto& p : m.own_parameters()) out.emplace_back(join(prefix, p.name), p.slot->tensor);
  for (const auto& b : m.own_buffers())
    if (b.persistent) out.emplace_back(join(prefix, b.name), b.slot->tensor);
  for (const auto& c : m.children()) add_state_dict(*c.module, join(prefix, c.name), out);
}

}  // namespace

std::vector<NamedModule> Module::named_modules(bool remove_duplicate) const {
  std::unordered_set<const Module*> memo;
  std::vector<NamedModule> out;
  walk_modules(this, "", remove_duplicate, memo, out);
  return out;
}

std::vector<NamedModule> Module::named_children() const {
  // PyTorch's named_children skips a child module object already listed under another name.
  std::unordered_set<const Module*> memo;
  std::vector<NamedModule> out;
  for (const auto& c : children_)
    if (memo.insert(c.module.get()).second) out.push_back(NamedModule{c.name, c.module.get()});
  return out;
}

NamedSlots Module::named_parameter_slots(bool recurse, bool remove_duplicate) const {
  return named_members(*this, recurse, remove_duplicate, false);
}

NamedSlots Module::named_buffer_slots(bool recurse, bool remove_duplicate) const {
  return named_members(*this, recurse, remove_duplicate, true);
}

NamedTensors Module::named_parameters(bool recurse, bool remove_duplicate) const {
  return to_tensors(named_parameter_slots(recurse, remove_duplicate));
}

NamedTensors Module::named_buffers(bool recurse, bool remove_duplicate) const {
  return to_tensors(named_buffer_slots(recurse, remove_duplicate));
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  add_state_dict(*this, "", out);
  return out;
}

// ---- moves -------------------------------------------------------------------------------------------------

void Module::to(Device device) {
  if (move_guard_) move_guard_(*this, device);
  NamedSlots slots = named_parameter_slots();
  NamedSlots buffers = named_buffer_slots();
  slots.insert(slots.end(), buffers.begin(), buffers.end());
  for (const auto& [name, slot] : slots) {
    try {
      slot->tensor = slot->tensor.to(device);
    } catch (const Error& e) {
      throw e.with_context(name);
    }
  }
}

void Module::to(DType dtype) {
  NamedSlots slots = named_parameter_slots();
  NamedSlots buffers = named_buffer_slots();
  slots.insert(slots.end(), buffers.begin(), buffers.end());
  for (const auto& [name, slot] : slots) {
    (void)name;
    if (is_floating_point(slot->tensor.dtype())) slot->tensor = slot->tensor.to(dtype);
  }
}

}  // namespace ferry::nn
