// Elementwise ops and activations on a GPU: add/mul with the trailing-shape broadcast of elementwise.h (b repeats
// every b.numel() elements of a), scale, silu, gelu (erf), gelu_tanh, relu, the fused silu·mul of SwiGLU and softcap.
#include <algorithm>

#include "common.cuh"
#include "ops/cuda_ops.h"

namespace ferry::ops::cuda {
namespace {

__global__ void binary_kernel(const float* a, const float* b, float* y, int64_t n, int64_t period, bool multiply) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float bv = b[i % period];
    y[i] = multiply ? a[i] * bv : a[i] + bv;
  }
}

__global__ void scale_kernel(const float* x, float s, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = x[i] * s;
}

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }

__global__ void activation_kernel(const float* x, float* y, int64_t n, Activation act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    float r;
    switch (act) {
      case Activation::Silu: r = silu_f(v); break;
      case Activation::Gelu: r = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); break;
      case Activation::GeluTanh: {
        const float inner = 0.79788456080286536f * (v + 0.044715f * v * v * v);
        r = 0.5f * v * (1.0f + tanhf(inner));
        break;
      }
      default: r = v > 0.0f ? v : 0.0f; break;
    }
    y[i] = r;
  }
}

__global__ void softcap_kernel(const float* x, float cap, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = tanhf(x[i] / cap) * cap;
}

__global__ void silu_mul_kernel(const float* g, const float* u, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = silu_f(g[i]) * u[i];
}

// Dtypes and the broadcast were checked by ops::add / mul (cpu/elementwise.cc): only the device is left.
void check_broadcast(const char* op, const Tensor& a, const Tensor& b) { check_gpu(op, "b", b, a); }

void launch_binary(const char* op, const Tensor& a, const Tensor& b, const Tensor& y, bool multiply) {
  const int64_t n = a.numel();
  if (n == 0) return;
  set_device(a);
  binary_kernel<<<grid_for(n, 256), 256>>>(a.data<float>(), b.data<float>(), y.data<float>(), n, b.numel(), multiply);
  check_launch(op);
}

}  // namespace

Tensor binary(const char* op, const Tensor& a, const Tensor& b, bool multiply) {
  check_broadcast(op, a, b);
  Tensor y = Tensor::empty(a.shape(), DType::F32, a.device());
  if (b.numel() == 0 && a.numel() != 0) return y;
  launch_binary(op, a, b, y, multiply);
  return y;
}

void binary_(const char* op, Tensor& a, const Tensor& b, bool multiply) {
  check_broadcast(op, a, b);  // writability and overlap were checked by ops::add_ / mul_ (cpu/elementwise.cc)
  launch_binary(op, a, b, a, multiply);
}

Tensor scale(const Tensor& x, float s) {
  check_gpu_f32("scale", "x", x, x);
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  if (x.numel() == 0) return y;
  set_device(x);
  scale_kernel<<<grid_for(x.numel(), 256), 256>>>(x.data<float>(), s, y.data<float>(), x.numel());
  check_launch("scale");
  return y;
}

Tensor activation(const Tensor& x, Activation act) {
  check_gpu_f32("activation", "x", x, x);
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  if (x.numel() == 0) return y;
  set_device(x);
  activation_kernel<<<grid_for(x.numel(), 256), 256>>>(x.data<float>(), y.data<float>(), x.numel(), act);
  check_launch("activation");
  return y;
}

Tensor softcap(const Tensor& x, float cap) {
  check_gpu_f32("softcap", "x", x, x);
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  if (x.numel() == 0) return y;
  set_device(x);
  softcap_kernel<<<grid_for(x.numel(), 256), 256>>>(x.data<float>(), cap, y.data<float>(), x.numel());
  check_launch("softcap");
  return y;
}

Tensor silu_mul(const Tensor& gate, const Tensor& up) {
  check_gpu_f32("silu_mul", "gate", gate, gate);
  check_gpu_f32("silu_mul", "up", up, gate);
  if (gate.shape() != up.shape())
    cpu::fail("silu_mul", format_message("{} and {} differ in shape", cpu::describe("gate", gate), cpu::describe("up", up)));
  Tensor y = Tensor::empty(gate.shape(), DType::F32, gate.device());
  if (gate.numel() == 0) return y;
  set_device(gate);
  silu_mul_kernel<<<grid_for(gate.numel(), 256), 256>>>(gate.data<float>(), up.data<float>(), y.data<float>(),
                                                        gate.numel());
  check_launch("silu_mul");
  return y;
}

}  // namespace ferry::ops::cuda
