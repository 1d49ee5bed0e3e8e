// Activation functions by their Hugging Face config names (transformers' ACT2FN: "gelu_new", "gelu", "relu", ...),
// so a family reads config.json's hidden_act / activation_function once and applies it by name.
//
// Activations are plain functions here, not modules: transformers' activation modules hold no tensors, so leaving
// them out of the module tree changes no parameter name and no device-map entry of a no-split block.
#pragma once

#include <string_view>

#include "ferry/core/tensor.h"

namespace ferry::nn {

/// Throws ferry::Error naming `name` and listing the supported ones ("gelu", "gelu_python", "gelu_new",
/// "gelu_pytorch_tanh", "gelu_fast", "gelu_python_tanh", "relu", "silu", "swish") when ferry has no kernel for it.
void check_activation(std::string_view name);

/// ACT2FN[name](x) for f32 x.
Tensor activation(std::string_view name, const Tensor& x);

}  // namespace ferry::nn
