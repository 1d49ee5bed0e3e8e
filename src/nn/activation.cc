// HF activation names -> ferry::ops kernels (transformers/activations.py ACT2FN).
#include "ferry/nn/activation.h"

#include <string>

#include "ferry/core/error.h"
#include "ferry/ops/elementwise.h"

namespace ferry::nn {

namespace {

enum class Act { Gelu, GeluTanh, Relu, Silu, Unknown };

Act parse(std::string_view name) {
  if (name == "gelu" || name == "gelu_python") return Act::Gelu;  // exact erf GELU
  // The tanh approximation, however transformers writes it: gelu_fast (GPT-NeoX-20B) is
  // 0.5·x·(1 + tanh(0.7978845608·x·(1 + 0.044715·x²))), the same function in another f32 order.
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast" || name == "gelu_python_tanh")
    return Act::GeluTanh;
  if (name == "relu") return Act::Relu;
  if (name == "silu" || name == "swish") return Act::Silu;
  return Act::Unknown;
}

}  // namespace

void check_activation(std::string_view name) {
  if (parse(name) == Act::Unknown)
    throw Error("activation \"" + std::string(name) + "\" is not supported", "hidden_act / activation_function",
                "ferry implements gelu, gelu_python, gelu_new, gelu_pytorch_tanh, gelu_fast, gelu_python_tanh, relu, "
                "silu and swish.");
}

Tensor activation(std::string_view name, const Tensor& x) {
  switch (parse(name)) {
    case Act::Gelu: return ops::gelu(x);
    case Act::GeluTanh: return ops::gelu_tanh(x);
    case Act::Relu: return ops::relu(x);
    case Act::Silu: return ops::silu(x);
    case Act::Unknown: break;
  }
  check_activation(name);
  return {};
}

}  // namespace ferry::nn
