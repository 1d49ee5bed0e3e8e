// RMSNorm, LayerNorm and softmax over the last dimension on a GPU: one block per row, f32 arithmetic, the
// parameters read in their stored dtype. Formulas as the cpu kernels (cpu/norm.cc): r = 1/sqrt(mean(x²) + eps).
#include "common.cuh"
#include "ops/cuda_ops.h"

namespace ferry::ops::cuda {
namespace {

constexpr int kThreads = 256;

template <class W>
__global__ void rms_norm_kernel(const float* x, const W* w, float* y, int64_t D, float eps) {
  __shared__ float scratch[33];
  const float* row = x + blockIdx.x * D;
  float* out = y + blockIdx.x * D;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) ss += row[i] * row[i];
  ss = block_sum(ss, scratch);
  const float r = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) out[i] = w ? row[i] * r * ld(w, i) : row[i] * r;
}

template <class W>
__global__ void layer_norm_kernel(const float* x, const W* w, const W* b, float* y, int64_t D, float eps) {
  __shared__ float scratch[33];
  const float* row = x + blockIdx.x * D;
  float* out = y + blockIdx.x * D;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) s += row[i];
  const float mean = block_sum(s, scratch) / static_cast<float>(D);
  float v = 0.0f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) v += (row[i] - mean) * (row[i] - mean);
  const float rstd = 1.0f / sqrtf(block_sum(v, scratch) / static_cast<float>(D) + eps);
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    float o = (row[i] - mean) * rstd;
    if (w) o *= ld(w, i);
    if (b) o += ld(b, i);
    out[i] = o;
  }
}

__global__ void softmax_kernel(const float* x, float* y, int64_t D) {
  __shared__ float scratch[33];
  const float* row = x + blockIdx.x * D;
  float* out = y + blockIdx.x * D;
  float m = -INFINITY;
  bool nan = false;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    m = fmaxf(m, row[i]);
    nan |= isnan(row[i]);
  }
  m = block_max(m, scratch);
  const bool any_nan = block_sum(nan ? 1.0f : 0.0f, scratch) > 0.0f;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) s += expf(row[i] - m);
  s = block_sum(s, scratch);
  const float inv = 1.0f / s;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
    out[i] = (any_nan || m == -INFINITY) ? NAN : expf(row[i] - m) * inv;
}

void check_param(const char* op, const char* name, const Tensor& p, const Tensor& x) {
  if (!p.defined()) return;
  check_gpu(op, name, p, x);
  if (!kernel_float(p.dtype())) cpu::fail(op, cpu::describe(name, p) + " must be a float dtype");
  if (p.numel() != x.size(-1))
    cpu::fail(op, cpu::describe(name, p) + " must have one element per feature of " + cpu::describe("x", x));
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  check_gpu_f32("rms_norm", "x", x, x);
  cpu::check_min_dim("rms_norm", "x", x, 1);
  check_param("rms_norm", "weight", weight, x);
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  const int64_t rows = rows_of(x), D = x.size(-1);
  if (rows == 0 || D == 0) return y;
  set_device(x);
  const DType wt = weight.defined() ? weight.dtype() : DType::F32;
  with_float_type("rms_norm", wt, [&](auto tag) {
    using W = decltype(tag);
    const W* w = weight.defined() ? static_cast<const W*>(weight.raw_data()) : nullptr;
    rms_norm_kernel<W><<<static_cast<unsigned>(rows), kThreads>>>(x.data<float>(), w, y.data<float>(), D, eps);
  });
  check_launch("rms_norm");
  return y;
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  check_gpu_f32("layer_norm", "x", x, x);
  cpu::check_min_dim("layer_norm", "x", x, 1);
  check_param("layer_norm", "weight", weight, x);
  check_param("layer_norm", "bias", bias, x);
  // One parameter dtype per launch: a bias of another dtype than the weight is converted first.
  const DType pt = weight.defined() ? weight.dtype() : bias.defined() ? bias.dtype() : DType::F32;
  const Tensor b = bias.defined() ? bias.to(pt) : bias;
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  const int64_t rows = rows_of(x), D = x.size(-1);
  if (rows == 0 || D == 0) return y;
  set_device(x);
  with_float_type("layer_norm", pt, [&](auto tag) {
    using W = decltype(tag);
    const W* w = weight.defined() ? static_cast<const W*>(weight.raw_data()) : nullptr;
    const W* bp = b.defined() ? static_cast<const W*>(b.raw_data()) : nullptr;
    layer_norm_kernel<W><<<static_cast<unsigned>(rows), kThreads>>>(x.data<float>(), w, bp, y.data<float>(), D, eps);
  });
  check_launch("layer_norm");
  return y;
}

Tensor softmax(const Tensor& x) {
  check_gpu_f32("softmax", "x", x, x);
  cpu::check_min_dim("softmax", "x", x, 1);
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  const int64_t rows = rows_of(x), D = x.size(-1);
  if (rows == 0 || D == 0) return y;
  set_device(x);
  softmax_kernel<<<static_cast<unsigned>(rows), kThreads>>>(x.data<float>(), y.data<float>(), D);
  check_launch("softmax");
  return y;
}

}  // namespace ferry::ops::cuda
