// Tied parameters: several names for one parameter (lm_head.weight and model.embed_tokens.weight).
//
// A tie is a shared TensorSlot (module.h): tie with `b.register_parameter("weight", a.parameter_slot("weight"))`.
// Because moves replace the tensor inside the slot, ties survive init_empty_weights, set_module_tensor_to_device
// and Module::to without retie_parameters; retie_parameters is still here for plans that name groups explicitly.
#pragma once

#include <string>
#include <vector>

#include "ferry/nn/module.h"

namespace ferry::nn {

/// Groups of names that share one parameter, each group sorted and the groups sorted:
///   Sequential(l, l) -> [["0.bias", "1.bias"], ["0.weight", "1.weight"]]
/// Parameters with a single name are not listed. Accelerate: find_tied_parameters
std::vector<std::vector<std::string>> find_tied_parameters(const Module& model);

/// For each group, makes every name share the slot of the first name whose tensor is not on meta (a group that
/// is all meta is left alone). Throws ferry::Error for a name that does not exist.
/// Accelerate: retie_parameters
void retie_parameters(Module& model, const std::vector<std::vector<std::string>>& tied_params);

}  // namespace ferry::nn
