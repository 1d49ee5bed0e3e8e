// The CUDA kernels behind the public ops (include/ferry/ops/*.h). The public functions in src/ops/cpu check their
// arguments' devices first and hand tensors that live on a GPU to these; the cuda/ folder holds them and is built
// only with FERRY_CUDA. In a build without it `kBuilt` is false and the calls sit in discarded `if constexpr`
// branches, so nothing here needs a definition.
//
// Conventions are those of the cpu ops: activations f32, weights any float dtype, results on the input's device.
// Kernels run on the device's compute stream (the legacy default stream) and return without waiting.
#pragma once

#include <utility>

#include "ferry/core/tensor.h"
#include "ferry/ops/rotary.h"

namespace ferry::ops::cuda {

#ifdef FERRY_HAVE_CUDA
inline constexpr bool kBuilt = true;
#else
inline constexpr bool kBuilt = false;
#endif

/// Whether an op given these tensors runs on a GPU: the first defined one decides (ops never move data).
inline bool on_gpu(const Tensor& t) { return t.defined() && t.device().is_cuda(); }

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
void linear_into(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out);
Tensor matmul(const Tensor& a, const Tensor& b);

Tensor binary(const char* op, const Tensor& a, const Tensor& b, bool multiply);       // add, mul
void binary_(const char* op, Tensor& a, const Tensor& b, bool multiply);              // add_, mul_
Tensor scale(const Tensor& x, float s);
enum class Activation { Silu, Gelu, GeluTanh, Relu };
Tensor activation(const Tensor& x, Activation act);
Tensor silu_mul(const Tensor& gate, const Tensor& up);
Tensor softcap(const Tensor& x, float cap);

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps);
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps);
Tensor softmax(const Tensor& x);

void apply_rotary_(Tensor& x, const Tensor& positions, const Tensor& inv_freq, RopeLayout layout,
                   float attention_scaling);

Tensor embedding(const Tensor& weight, const Tensor& ids);
Tensor argmax(const Tensor& x);

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_offset, float scale,
                 int64_t sliding_window, float softcap);
Tensor attention_with_bias(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, int64_t q_offset,
                           bool causal, float scale);

}  // namespace ferry::ops::cuda
