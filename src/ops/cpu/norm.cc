// rms_norm, layer_norm and batch_norm on cpu: argument checks, the scalar row kernels (sums in double, so the
// reference is more accurate than the vector path it checks), the row loop over the thread pool, and the
// per-ISA table of the row kernels (softmax's included).
#include <fmt/format.h>

#include <cmath>

#include "check.h"
#include "ops/cuda_ops.h"
#include "ferry/core/thread_pool.h"
#include "ferry/ops/norm.h"
#include "norm_kernels.h"

namespace ferry::ops {
namespace cpu {
namespace scalar {

void rms_norm(const float* x, const float* w, float* y, int64_t D, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < D; ++i) ss += double(x[i]) * double(x[i]);
  const float r = 1.0f / std::sqrt(static_cast<float>(ss / double(D)) + eps);
  for (int64_t i = 0; i < D; ++i) y[i] = w ? w[i] * (x[i] * r) : x[i] * r;
}

void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t D, float eps) {
  double s = 0;
  for (int64_t i = 0; i < D; ++i) s += x[i];
  const float mean = static_cast<float>(s / double(D));
  double v = 0;
  for (int64_t i = 0; i < D; ++i) v += (double(x[i]) - mean) * (double(x[i]) - mean);
  const float rstd = 1.0f / std::sqrt(static_cast<float>(v / double(D)) + eps);
  for (int64_t i = 0; i < D; ++i) {
    float t = (x[i] - mean) * rstd;
    if (w) t *= w[i];
    if (b) t += b[i];
    y[i] = t;
  }
}

}  // namespace scalar

const NormKernels& norm_kernels(Isa isa) {
  static const NormKernels s{scalar::rms_norm, scalar::layer_norm, scalar::softmax};
#if FERRY_X86_KERNELS
  static const NormKernels v{avx2::rms_norm, avx2::layer_norm, avx2::softmax};
  if (isa >= Isa::AVX2) return v;
#endif
  (void)isa;
  return s;
}

}  // namespace cpu

namespace {

// Runs fn(row_in, row_out) over the rows of x's last dimension on the thread pool.
template <class F>
Tensor map_rows(const Tensor& x, F fn) {
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  const int64_t D = x.size(-1), rows = D ? x.numel() / D : 0;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(D, 1));
  parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) fn(xp + r * D, yp + r * D, D);
  });
  return y;
}

const float* ptr(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(x)) return cuda::rms_norm(x, weight, eps);
  }
  cpu::check_f32("rms_norm", "x", x);
  cpu::check_min_dim("rms_norm", "x", x, 1);
  const Tensor w = cpu::param_f32("rms_norm", "weight", weight, x.size(-1), x);
  const auto kernel = cpu::norm_kernels(cpu_isa()).rms_norm;
  const float* wp = ptr(w);
  return map_rows(x, [&](const float* in, float* out, int64_t D) { kernel(in, wp, out, D, eps); });
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(x)) return cuda::layer_norm(x, weight, bias, eps);
  }
  cpu::check_f32("layer_norm", "x", x);
  cpu::check_min_dim("layer_norm", "x", x, 1);
  const Tensor w = cpu::param_f32("layer_norm", "weight", weight, x.size(-1), x);
  const Tensor b = cpu::param_f32("layer_norm", "bias", bias, x.size(-1), x);
  const auto kernel = cpu::norm_kernels(cpu_isa()).layer_norm;
  const float *wp = ptr(w), *bp = ptr(b);
  return map_rows(x, [&](const float* in, float* out, int64_t D) { kernel(in, wp, bp, out, D, eps); });
}

Tensor softmax(const Tensor& x) {
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(x)) return cuda::softmax(x);
  }
  cpu::check_f32("softmax", "x", x);
  cpu::check_min_dim("softmax", "x", x, 1);
  const auto kernel = cpu::norm_kernels(cpu_isa()).softmax;
  return map_rows(x, [&](const float* in, float* out, int64_t D) { kernel(in, out, D); });
}

// Inference BatchNorm as PyTorch's cpu kernel computes it: per channel alpha = w / √(var + eps) and
// beta = b − mean·alpha, then y = x·alpha + beta. Channels are dim 1 of [N, C] / [N, C, L], dim 0 of [C].
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, float eps) {
  // Rare in the models ferry runs (no CUDA kernel): a GPU's tensors take the cpu kernel and come back.
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(x)) {
      const Device cpu_device = Device::cpu();
      return batch_norm(x.to(cpu_device), running_mean.to(cpu_device), running_var.to(cpu_device),
                        weight.to(cpu_device), bias.to(cpu_device), eps)
          .to(x.device());
    }
  }
  cpu::check_f32("batch_norm", "x", x);
  if (x.dim() < 1 || x.dim() > 3)
    cpu::fail("batch_norm", cpu::describe("x", x) + " must be [C], [N, C] or [N, C, L]");
  const int64_t C = x.dim() == 1 ? x.size(0) : x.size(1);
  const int64_t N = x.dim() == 1 ? 1 : x.size(0), L = x.dim() == 3 ? x.size(2) : 1;
  if (!running_mean.defined() || !running_var.defined())
    cpu::fail("batch_norm", "running_mean and running_var are required for inference",
              "load the module's buffers (running_mean, running_var) with its weights");
  const Tensor mean = cpu::param_f32("batch_norm", "running_mean", running_mean, C, x);
  const Tensor var = cpu::param_f32("batch_norm", "running_var", running_var, C, x);
  const Tensor w = cpu::param_f32("batch_norm", "weight", weight, C, x);
  const Tensor b = cpu::param_f32("batch_norm", "bias", bias, C, x);
  std::vector<float> alpha(static_cast<std::size_t>(C)), beta(static_cast<std::size_t>(C));
  const float *mp = mean.data<float>(), *vp = var.data<float>(), *wp = ptr(w), *bp = ptr(b);
  for (int64_t c = 0; c < C; ++c) {
    const float invstd = 1.0f / std::sqrt(vp[c] + eps);
    alpha[c] = wp ? invstd * wp[c] : invstd;
    beta[c] = (bp ? bp[c] : 0.0f) - mp[c] * alpha[c];
  }
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t l = 0; l < L; ++l) {
        const int64_t i = (n * C + c) * L + l;
        yp[i] = xp[i] * alpha[c] + beta[c];
      }
  return y;
}

}  // namespace ferry::ops
