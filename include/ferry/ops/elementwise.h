// Elementwise ops and activations on f32 tensors (cpu). `b` broadcasts when its shape equals a trailing part
// of a's shape (e.g. a bias [N] over [T, N]); scalars are plain floats. Results are new tensors unless the
// name ends in '_' (in place, like PyTorch; b may be a itself, any other overlap with a throws). Results live on
// a's device. Shape or dtype mismatches throw ferry::Error naming the op and both shapes.
#pragma once

#include "ferry/core/tensor.h"

namespace ferry::ops {

Tensor add(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& x, float s);
void add_(Tensor& a, const Tensor& b);
void mul_(Tensor& a, const Tensor& b);

Tensor silu(const Tensor& x);        // x · sigmoid(x)
Tensor gelu(const Tensor& x);        // exact: 0.5·x·(1 + erf(x/√2))            (HF "gelu")
Tensor gelu_tanh(const Tensor& x);   // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (HF "gelu_new", "gelu_pytorch_tanh")
inline Tensor gelu_new(const Tensor& x) { return gelu_tanh(x); }
Tensor relu(const Tensor& x);
/// silu(gate) · up, the SwiGLU MLP's middle step, in one pass.
Tensor silu_mul(const Tensor& gate, const Tensor& up);
/// cap · tanh(x / cap), Gemma 2's final_logit_softcapping (transformers: logits / cap, tanh, · cap). cap > 0.
Tensor softcap(const Tensor& x, float cap);

}  // namespace ferry::ops
