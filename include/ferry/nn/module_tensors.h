// Finding and replacing a module's tensors by dotted name: Accelerate's set_module_tensor_to_device,
// named_module_tensors and get_non_persistent_buffers, plus the lookups later layers use.
//
// set_module_tensor_to_device replaces the tensor inside the parameter's shared slot (module.h), so tied
// parameters move together and stay tied.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ferry/core/device.h"
#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"
#include "ferry/nn/module.h"

namespace ferry::nn {

/// Accelerate's tied_params_map: data pointer of a (source or old) tensor -> device -> the tensor already
/// materialised there. An entry is only ever filled for a key that already exists (the caller seeds the keys of
/// tied tensors), exactly as Accelerate does.
using TiedParamsMap = std::unordered_map<const void*, std::unordered_map<Device, Tensor>>;

/// The address of a tensor's first byte (storage data + offset), nullptr for meta and undefined tensors: the
/// analogue of torch's data_ptr(), the key of TiedParamsMap.
const void* tensor_data_ptr(const Tensor& t) noexcept;

/// Sets parameter or buffer `tensor_name` ("linear1.weight" from `module`, or "weight" from the submodule) to
/// live on `device`, optionally replacing its value. Accelerate's rules:
///  - With a TiedParamsMap: if `value`'s (else the old tensor's) data pointer has an entry for `device`, that
///    tensor is used and nothing is copied.
///  - Moving a meta tensor to a real device without `value` throws ferry::Error ("... is on the meta device, we
///    need a `value` to put in on cpu.").
///  - A value whose shape differs throws ferry::Error with Accelerate's text: 'Trying to set a tensor of shape
///    [2, 2] in "weight" (which has shape [4, 3]), this looks incorrect.' (ferry prints shapes as [..]).
///  - Without `dtype`, value is cast to the existing tensor's dtype; with `dtype`, floating-point values are cast
///    to it and integer/bool values are never cast. A slot of a quantized dtype (big_modeling/quantize.h) keeps
///    it: floating-point values are quantized into it whatever `dtype` says.
///  - Without value but with dtype, a floating-point tensor is cast too (Accelerate only does this when the
///    target is meta; ferry does it for every device, which is what a caller passing dtype means).
///  - Unknown names throw ferry::Error naming the module type and its tensors.
/// `device` must be a tensor device (not disk). `value` undefined = none.
/// Accelerate: set_module_tensor_to_device
void set_module_tensor_to_device(Module& module, std::string_view tensor_name, Device device,
                                 const Tensor& value = {}, std::optional<DType> dtype = std::nullopt,
                                 TiedParamsMap* tied_params_map = nullptr);

/// The module's parameters, then its buffers (recurse: over the whole subtree, in named_parameters /
/// named_buffers order). remove_non_persistent drops buffers registered with persistent=false — by their
/// owner, so a persistent buffer that shares a name with another module's non-persistent one is kept
/// (Accelerate compares bare names here and can drop the wrong one). The module is not changed.
/// Accelerate: named_module_tensors(module, include_buffers=True, recurse=False, remove_non_persistent=False)
NamedTensors named_module_tensors(const Module& module, bool include_buffers = true, bool recurse = false,
                                  bool remove_non_persistent = false);

/// Names of non-persistent buffers: the module's own, and with recurse its descendants' too (as bare names, or
/// dotted from `module` with fqns).
/// Accelerate: get_non_persistent_buffers
std::set<std::string> get_non_persistent_buffers(const Module& module, bool recurse = false, bool fqns = false);

/// The device of the module's first parameter in named_parameters order (its own, then its children's, depth
/// first), found without listing them all; nullopt when it has none. Accelerate: next(model.parameters()).device
std::optional<Device> first_parameter_device(const Module& module) noexcept;

/// The module that owns dotted tensor `name` and the tensor's local name ("a.b.weight" -> (a.b, "weight")).
/// Throws ferry::Error when a component or the tensor is missing.
std::pair<Module*, std::string> resolve_tensor_owner(const Module& root, std::string_view name);
/// The tensor (parameter or buffer) at dotted `name`; throws like resolve_tensor_owner.
const Tensor& get_module_tensor(const Module& root, std::string_view name);
/// Its slot; nullptr when absent (no throw).
std::shared_ptr<TensorSlot> find_tensor_slot(const Module& root, std::string_view name) noexcept;

}  // namespace ferry::nn
