// The hook interface of the object model: callbacks around a module's forward, after Accelerate's hooks.py.
//
// A hook is attached to one module (Module::hook(), Accelerate's `_hf_hook`). Calling the module then runs
//   args = hook.pre_forward(module, args); out = module.forward(args); out = hook.post_forward(module, out)
// (ferry: unless hook.replace_forward(module, args) gives the output first: then nothing else runs)
// Concrete hooks (AlignDevicesHook, LayerwiseCastingHook, CpuOffload) live in big_modeling; nn only defines the
// protocol, so nn never depends on big_modeling. Each callback's default is the identity.
//
// Departures from Accelerate, on purpose:
//  - init_hook/detach_hook return nothing: a C++ hook cannot swap the module object for another.
//  - forward_failed is new: Python leaves a hook half-applied when a forward raises (weights stay on the GPU);
//    here the module calls it before the exception propagates.
//  - no `no_grad`: ferry is inference only, so it is always in effect.
// Hooks are shared_ptr so one hook may serve several modules; a hook is not synchronised.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ferry/nn/module.h"  // Module
#include "ferry/nn/value.h"   // Args, Value

namespace ferry::nn {

/// Accelerate: ModelHook
class ModelHook {
 public:
  virtual ~ModelHook() = default;

  /// Runs once when the hook is attached (add_hook_to_module). May move the module's tensors.
  virtual void init_hook(Module& module) { (void)module; }
  /// Runs just before module.forward; returns the (possibly rewritten) arguments it will receive.
  virtual Args pre_forward(Module& module, Args args) {
    (void)module;
    return args;
  }
  /// ferry only: a value that stands for the module's output — the module runs on another rank of a pipeline
  /// (big_modeling/pipeline.h). Asked before pre_forward; a value skips pre_forward, forward and post_forward.
  /// nullopt (the default): the module runs here.
  virtual std::optional<Value> replace_forward(Module& module, const Args& args) {
    (void)module;
    (void)args;
    return std::nullopt;
  }
  /// Runs just after module.forward; returns the (possibly rewritten) output the caller will receive.
  virtual Value post_forward(Module& module, Value output) {
    (void)module;
    return output;
  }
  /// Runs when the hook is removed (remove_hook_from_module, or add_hook_to_module with append).
  virtual void detach_hook(Module& module) { (void)module; }
  /// ferry only: pre_forward, forward or post_forward threw. Put the module back in its between-calls state.
  /// May run after a pre_forward that stopped half-way, or after post_forward already ran partly: be
  /// idempotent. Must not throw.
  virtual void forward_failed(Module& module) noexcept { (void)module; }

  /// ferry only: the model knows the module will run soon, though not in a fixed order (the experts a mixture-of-
  /// experts router picked for this token). A hook that fetches weights ahead starts on this module's now.
  virtual void will_run_soon(Module& module) { (void)module; }
  /// ferry only: the model guesses the module may run soon (the experts the next layer's router would pick now). A
  /// hook that fetches weights ahead may start on them once what will run is under way; a guess never delays a
  /// module announced by will_run_soon, and the next will_run_soon makes the guesses not yet started stale.
  virtual void may_run_soon(Module& module) { (void)module; }

  /// For messages and debugging ("AlignDevicesHook(execution_device=cuda:0, offload=true)").
  virtual std::string describe() const { return "ModelHook"; }
};

/// Several hooks acting as one, each callback running them in order (post_forward too, like Accelerate's:
/// hooks[0].post_forward sees the forward's output first). forward_failed runs them in reverse order.
/// Accelerate: SequentialHook
class SequentialHook : public ModelHook {
 public:
  explicit SequentialHook(std::vector<std::shared_ptr<ModelHook>> hooks);

  void init_hook(Module& module) override;
  Args pre_forward(Module& module, Args args) override;
  std::optional<Value> replace_forward(Module& module, const Args& args) override;
  Value post_forward(Module& module, Value output) override;
  void detach_hook(Module& module) override;
  void forward_failed(Module& module) noexcept override;
  void will_run_soon(Module& module) override;
  void may_run_soon(Module& module) override;
  std::string describe() const override;

  const std::vector<std::shared_ptr<ModelHook>>& hooks() const noexcept { return hooks_; }

 private:
  std::vector<std::shared_ptr<ModelHook>> hooks_;
};

/// Attaches `hook` to `module` and runs hook->init_hook(module).
/// By default an existing hook is *replaced* — without its detach_hook running, exactly as in Accelerate.
/// With append=true an existing hook is detached (detach_hook runs) and chained with the new one into a
/// SequentialHook(old, new), whose init_hook runs both init_hooks again.
/// If init_hook throws, the module keeps the hook it had just before (none, in the append case).
/// Throws ferry::Error for a null hook.
/// Accelerate: add_hook_to_module
void add_hook_to_module(Module& module, std::shared_ptr<ModelHook> hook, bool append = false);

/// Runs detach_hook of the module's hook (if any), removes it, and clears the move guard (dispatch_model's
/// `.to` wrapper), restoring the plain forward. With recurse, does the same for every descendant.
/// Accelerate: remove_hook_from_module
void remove_hook_from_module(Module& module, bool recurse = false);

/// Tells the hooks of `modules` (in the order they will run) that they run soon: what a model calls for modules it
/// picks from the data (the experts a router chose), so offloaded weights are fetched ahead though no fixed order
/// predicts them. Modules without a hook are skipped.
void announce_will_run(std::span<Module* const> modules);
/// The same for modules the model guesses may run (ModelHook::may_run_soon): fetched ahead with a lower priority.
void announce_may_run(std::span<Module* const> modules);

/// remove_hook_from_module(child, recurse=true) for every direct child; the module's own hook stays.
/// Accelerate: remove_hook_from_submodules
void remove_hook_from_submodules(Module& module);

}  // namespace ferry::nn
