// The hook protocol's plumbing (Accelerate's hooks.py): SequentialHook folds several hooks into one, and
// add_hook_to_module / remove_hook_from_module attach and detach them. Module::operator() (module.cc) is the
// "new_forward" that runs them.
#include "ferry/nn/hooks.h"

#include "ferry/core/error.h"

namespace ferry::nn {

SequentialHook::SequentialHook(std::vector<std::shared_ptr<ModelHook>> hooks) : hooks_(std::move(hooks)) {
  for (const auto& h : hooks_)
    if (!h) throw Error("SequentialHook given a null hook");
}

void SequentialHook::init_hook(Module& module) {
  for (const auto& h : hooks_) h->init_hook(module);
}

Args SequentialHook::pre_forward(Module& module, Args args) {
  for (const auto& h : hooks_) args = h->pre_forward(module, std::move(args));
  return args;
}

// Same order as pre_forward, as in Accelerate (not reversed like a stack of wrappers would be).
std::optional<Value> SequentialHook::replace_forward(Module& module, const Args& args) {
  for (const auto& h : hooks_)
    if (auto v = h->replace_forward(module, args)) return v;
  return std::nullopt;
}

Value SequentialHook::post_forward(Module& module, Value output) {
  for (const auto& h : hooks_) output = h->post_forward(module, std::move(output));
  return output;
}

void SequentialHook::detach_hook(Module& module) {
  for (const auto& h : hooks_) h->detach_hook(module);
}

// Undo in reverse: the last hook's pre_forward ran last.
void SequentialHook::forward_failed(Module& module) noexcept {
  for (auto it = hooks_.rbegin(); it != hooks_.rend(); ++it) (*it)->forward_failed(module);
}

void SequentialHook::will_run_soon(Module& module) {
  for (auto& h : hooks_) h->will_run_soon(module);
}

void SequentialHook::may_run_soon(Module& module) {
  for (auto& h : hooks_) h->may_run_soon(module);
}

void announce_will_run(std::span<Module* const> modules) {
  for (Module* m : modules)
    if (m != nullptr && m->hook()) m->hook()->will_run_soon(*m);
}

void announce_may_run(std::span<Module* const> modules) {
  for (Module* m : modules)
    if (m != nullptr && m->hook()) m->hook()->may_run_soon(*m);
}

std::string SequentialHook::describe() const {
  std::string out = "SequentialHook(";
  for (std::size_t i = 0; i < hooks_.size(); ++i) out += (i ? ", " : "") + hooks_[i]->describe();
  return out + ")";
}

void add_hook_to_module(Module& module, std::shared_ptr<ModelHook> hook, bool append) {
  if (!hook) throw Error("add_hook_to_module given a null hook", module.type_name());
  if (append && module.hook()) {
    std::shared_ptr<ModelHook> old = module.hook();
    remove_hook_from_module(module);
    hook = std::make_shared<SequentialHook>(std::vector<std::shared_ptr<ModelHook>>{std::move(old), std::move(hook)});
  }
  // Accelerate replaces an existing hook without calling its detach_hook; so do we.
  hook->init_hook(module);
  module.set_hook_slot(std::move(hook));
}

void remove_hook_from_module(Module& module, bool recurse) {
  if (std::shared_ptr<ModelHook> hook = module.hook()) {
    hook->detach_hook(module);
    module.set_hook_slot(nullptr);
  }
  module.set_move_guard(nullptr);
  if (recurse)
    for (const auto& c : module.children()) remove_hook_from_module(*c.module, true);
}

void remove_hook_from_submodules(Module& module) {
  for (const auto& c : module.children()) remove_hook_from_module(*c.module, true);
}

}  // namespace ferry::nn
