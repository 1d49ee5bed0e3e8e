// Activations on cpu: silu, gelu (erf), gelu_tanh (gelu_new), relu, the fused silu(gate)·up and softcap, with their
// scalar kernels written exactly as PyTorch defines them (std::exp / std::erf / std::tanh in f32). These are
// the reference the AVX2 kernels (activation_avx2.cc) are tested against.
#include <cmath>
#include <string>

#include "check.h"
#include "ops/cuda_ops.h"
#include "elementwise_kernels.h"
#include "ferry/ops/elementwise.h"

namespace ferry::ops {
namespace cpu::scalar {

void silu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void gelu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
}

void gelu_tanh(const float* x, float* y, int64_t n) {
  constexpr float kBeta = 0.7978845608028654f, kKappa = 0.044715f;  // √(2/π)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(kBeta * (v + kKappa * v * v * v)));
  }
}

void relu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f || std::isnan(x[i]) ? x[i] : 0.0f;  // NaN stays NaN, like torch
}

void silu_mul(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace cpu::scalar

namespace {

using UnaryKernel = void (*)(const float*, float*, int64_t);

// The activation `which` (its CUDA kernel `on_gpu` when x lives on a GPU).
Tensor unary(const char* op, const Tensor& x, UnaryKernel cpu::ElementwiseKernels::*which,
             cuda::Activation on_gpu) {
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(x)) return cuda::activation(x, on_gpu);
  }
  cpu::check_f32(op, "x", x);
  const UnaryKernel kernel = cpu::elementwise_kernels(cpu_isa()).*which;
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  cpu::parallel_elements(x.numel(), [&](int64_t i0, int64_t i1) { kernel(xp + i0, yp + i0, i1 - i0); });
  return y;
}

}  // namespace

Tensor silu(const Tensor& x) { return unary("silu", x, &cpu::ElementwiseKernels::silu, cuda::Activation::Silu); }
Tensor gelu(const Tensor& x) { return unary("gelu", x, &cpu::ElementwiseKernels::gelu, cuda::Activation::Gelu); }
Tensor gelu_tanh(const Tensor& x) {
  return unary("gelu_tanh", x, &cpu::ElementwiseKernels::gelu_tanh, cuda::Activation::GeluTanh);
}
Tensor relu(const Tensor& x) { return unary("relu", x, &cpu::ElementwiseKernels::relu, cuda::Activation::Relu); }

Tensor softcap(const Tensor& x, float cap) {
  if (!(cap > 0.0f)) cpu::fail("softcap", "cap must be positive, got " + std::to_string(cap));
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(x)) return cuda::softcap(x, cap);
  }
  cpu::check_f32("softcap", "x", x);
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  cpu::parallel_elements(x.numel(), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) yp[i] = std::tanh(xp[i] / cap) * cap;
  });
  return y;
}

Tensor silu_mul(const Tensor& gate, const Tensor& up) {
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(gate)) return cuda::silu_mul(gate, up);
  }
  cpu::check_f32("silu_mul", "gate", gate);
  cpu::check_f32("silu_mul", "up", up);
  cpu::check_same_device("silu_mul", "gate", gate, "up", up);
  if (gate.shape() != up.shape())
    cpu::fail("silu_mul", cpu::describe("gate", gate) + " and " + cpu::describe("up", up) + " differ in shape");
  const auto kernel = cpu::elementwise_kernels(cpu_isa()).silu_mul;
  Tensor y = Tensor::empty(gate.shape(), DType::F32, gate.device());
  const float *g = gate.data<float>(), *u = up.data<float>();
  float* yp = y.data<float>();
  cpu::parallel_elements(gate.numel(), [&](int64_t i0, int64_t i1) { kernel(g + i0, u + i0, yp + i0, i1 - i0); });
  return y;
}

}  // namespace ferry::ops
