// Module: the named tree that Accelerate's big-model API operates on (PyTorch's torch.nn.Module, inference only).
//
// A module has ordered children, named parameters and named buffers (persistent or not), and a type_name() that
// no_split_module_classes / preload_module_classes match. Names joined with "." are exactly the Hugging Face
// checkpoint keys ("model.layers.0.self_attn.q_proj.weight").
//
// Tensors live in TensorSlots held by shared_ptr. Tying a parameter (lm_head.weight = embed_tokens.weight) makes
// two modules hold the *same slot*; moving it (set_module_tensor_to_device, Module::to, hooks) replaces the Tensor
// inside the slot, so every owner sees the move and no bytes are duplicated. This departs from PyTorch, where
// `module._parameters[name] = new` silently unties (and Accelerate needs retie_parameters afterwards).
//
// Calling a module runs its hook (see hooks.h): operator()(Args) = hook.pre_forward -> forward -> post_forward.
//
// Children are held by shared_ptr too, so one module can appear twice in a tree (nn.Sequential(l, l)).
// Tree walks return raw Module pointers that stay valid while the tree holds them; const does not propagate
// through children (as with shared_ptr). Not synchronised: build and mutate a tree from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"
#include "ferry/nn/init.h"   // TensorInit
#include "ferry/nn/value.h"  // Value, Args

namespace ferry::nn {

class ModelHook;

/// The shared home of one parameter or buffer. Owners (modules that registered it) see every replacement of
/// `tensor`. An undefined tensor is never stored: absent parameters (Linear without bias) are not registered.
struct TensorSlot {
  Tensor tensor;
};

/// A parameter or buffer as a module stores it. `persistent` is meaningful for buffers only (a non-persistent
/// buffer is left out of state_dict, like PyTorch's register_buffer(persistent=False)).
struct NamedSlot {
  std::string name;
  std::shared_ptr<TensorSlot> slot;
  bool persistent = true;
};

struct NamedChild {
  std::string name;
  std::shared_ptr<class Module> module;
};

struct NamedModule {
  std::string name;  // dotted path from the module the walk started at; "" for that module itself
  class Module* module;
};

/// An ordered list of (dotted name, tensor): the shape of a PyTorch state_dict / named_parameters.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using NamedSlots = std::vector<std::pair<std::string, std::shared_ptr<TensorSlot>>>;

class Module {
 public:
  Module() = default;
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The class name, as Hugging Face spells it ("LlamaDecoderLayer"); what no_split_module_classes match.
  virtual std::string type_name() const { return "Module"; }

  /// The computation, without hooks. Subclasses override; the default throws ferry::Error (a container such as
  /// ModuleList has no forward). Call modules through operator(), never forward(), so hooks run.
  virtual Value forward(const Args& args);

  /// A module whose forward reads only the rows of one direct parameter that integer ids among its arguments pick
  /// (an embedding table) names that parameter; row_lookup_ids gives a call's ids (nullptr when it has none). An
  /// offloading hook then reads just those rows and hands the forward a table of them, the ids renumbered into it
  /// (AlignDevicesHook, big_modeling/align_devices_hook.h), so a table on disk costs a row per token, not the table.
  /// Default: "" (the forward may read every parameter whole).
  virtual std::string_view row_lookup_parameter() const noexcept { return {}; }
  virtual Value* row_lookup_ids(Args& args) const noexcept {
    (void)args;
    return nullptr;
  }

  /// hook.pre_forward -> forward -> hook.post_forward (or just forward without a hook). If any of the three
  /// throws, hook.forward_failed(*this) runs before the exception propagates, so the hook can restore the
  /// between-calls state (offloaded weights back to meta). The hook attached when the call starts serves the
  /// whole call, even if the forward replaces it.
  Value operator()(Args args);
  /// Shorthand for a one-tensor forward returning a tensor: (*this)(Args{x}).tensor().
  Tensor operator()(const Tensor& x);

  // ---- registration (PyTorch names) ------------------------------------------------------------------------

  /// Adds (or replaces, keeping its position) parameter `name` holding `tensor` in a new slot. Inside
  /// init_empty_weights / init_on_device the tensor is moved to that device first (to meta: its bytes are
  /// dropped). Throws ferry::Error for an undefined tensor, an empty name or one containing '.', or a name
  /// already used by a buffer or child.
  void register_parameter(std::string name, Tensor tensor);
  /// Allocation-aware form used by layer constructors: inside init_empty_weights the tensor is created on meta
  /// directly (no bytes are ever allocated); otherwise it is created on cpu (or the init_on_device device)
  /// and filled by `init`.
  void register_parameter(std::string name, Shape shape, DType dtype, const TensorInit& init);
  /// Ties: makes `name` hold `slot` (another module's parameter slot). The slot's tensor is not moved, even
  /// inside init_empty_weights.
  void register_parameter(std::string name, std::shared_ptr<TensorSlot> slot);

  /// Adds (or replaces) buffer `name`. Moved to the init device only inside init_empty_weights(include_buffers
  /// =true) / init_on_device(..., include_buffers=true), as Accelerate does.
  void register_buffer(std::string name, Tensor tensor, bool persistent = true);
  void register_buffer(std::string name, Shape shape, DType dtype, const TensorInit& init, bool persistent = true);

  /// Adds (or replaces, keeping its position) child `name`; returns it typed, for the member that keeps it:
  ///   linear1 = register_module("linear1", std::make_shared<Linear>(3, 4));
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    register_module_impl(std::move(name), module);
    return module;
  }

  // ---- direct members --------------------------------------------------------------------------------------

  bool has_parameter(std::string_view name) const noexcept { return find_parameter_slot(name) != nullptr; }
  bool has_buffer(std::string_view name) const noexcept { return find_buffer_slot(name) != nullptr; }
  /// The tensor of direct parameter/buffer `name`; throws ferry::Error naming the module type and what exists.
  const Tensor& parameter(std::string_view name) const;
  const Tensor& buffer(std::string_view name) const;
  /// Parameter if present, else buffer; throws if neither.
  const Tensor& tensor(std::string_view name) const;
  /// nullptr when absent.
  const std::shared_ptr<TensorSlot>* find_parameter_slot(std::string_view name) const noexcept;
  const std::shared_ptr<TensorSlot>* find_buffer_slot(std::string_view name) const noexcept;
  /// Throws when absent.
  const std::shared_ptr<TensorSlot>& parameter_slot(std::string_view name) const;
  bool is_persistent_buffer(std::string_view name) const;

  const std::vector<NamedSlot>& own_parameters() const noexcept { return params_; }
  const std::vector<NamedSlot>& own_buffers() const noexcept { return buffers_; }
  const std::vector<NamedChild>& children() const noexcept { return children_; }
  /// Direct child `name`, or nullptr.
  Module* child(std::string_view name) const noexcept;
  /// Accelerate/PyTorch: get_submodule("a.b.0"); "" is this module. Throws ferry::Error naming the first
  /// missing component and the children that do exist.
  Module& get_submodule(std::string_view dotted_name) const;
  /// nullptr instead of throwing.
  Module* find_submodule(std::string_view dotted_name) const noexcept;

  // ---- tree walks (PyTorch semantics and order) ------------------------------------------------------------

  /// This module ("") then every descendant, pre-order. remove_duplicate skips a module already seen (and its
  /// subtree), as PyTorch does.
  std::vector<NamedModule> named_modules(bool remove_duplicate = true) const;
  std::vector<NamedModule> named_children() const;
  /// For each module in named_modules order, its own parameters. remove_duplicate lists a shared (tied) slot
  /// only under its first name.
  NamedTensors named_parameters(bool recurse = true, bool remove_duplicate = true) const;
  NamedTensors named_buffers(bool recurse = true, bool remove_duplicate = true) const;
  /// The same walks, yielding the slots (for ties and for code that must replace tensors in place).
  NamedSlots named_parameter_slots(bool recurse = true, bool remove_duplicate = true) const;
  NamedSlots named_buffer_slots(bool recurse = true, bool remove_duplicate = true) const;
  /// PyTorch state_dict order: a module's own parameters, then its persistent buffers, then each child's
  /// state_dict under "child.". Tied tensors appear under every name.
  NamedTensors state_dict() const;

  // ---- moves -----------------------------------------------------------------------------------------------

  /// Moves every parameter and buffer of the tree to `device` (each slot once, so ties stay tied). Runs the
  /// move guard first, if one is set. Throws ferry::Error (naming the tensor) for meta -> a real device.
  void to(Device device);
  /// Casts every floating-point parameter and buffer to `dtype` (integer and bool tensors keep theirs, like
  /// PyTorch's .half()).
  void to(DType dtype);

  /// A check that to(Device) runs first, e.g. dispatch_model's "you can't move a model that has some modules
  /// offloaded". remove_hook_from_module clears it, as Accelerate removes its `.to` wrappers. Empty = none.
  using MoveGuard = std::function<void(const Module&, Device)>;
  void set_move_guard(MoveGuard guard) { move_guard_ = std::move(guard); }
  const MoveGuard& move_guard() const noexcept { return move_guard_; }

  // ---- hook slot (use add_hook_to_module / remove_hook_from_module from hooks.h) ---------------------------

  /// Accelerate: module._hf_hook. nullptr when none.
  const std::shared_ptr<ModelHook>& hook() const noexcept { return hook_; }
  /// Low level: sets the slot without init_hook/detach_hook. For hooks.cc; everything else calls
  /// add_hook_to_module.
  void set_hook_slot(std::shared_ptr<ModelHook> hook) noexcept { hook_ = std::move(hook); }

 private:
  void register_module_impl(std::string name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name, const char* what) const;
  void set_slot(std::vector<NamedSlot>& list, std::string name, std::shared_ptr<TensorSlot> slot, bool persistent);

  std::vector<NamedSlot> params_;
  std::vector<NamedSlot> buffers_;
  std::vector<NamedChild> children_;
  std::shared_ptr<ModelHook> hook_;
  MoveGuard move_guard_;
};

}  // namespace ferry::nn
