// ops::attention_with_bias on cpu (see attention.h): one task per (query, head), scores in f32 with the bias row
// added, a stable softmax, then the weighted sum of value rows. Plain loops: T5's heads are small (d_kv 64) and
// attention is a small part of its time next to the linear layers. Inputs on a GPU go to the CUDA kernel
// (cuda/attention.cu, the causal attention kernel with the bias added); inputs on another accelerator are computed
// here (copied to the host and back).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "check.h"
#include "ops/cuda_ops.h"
#include "ferry/core/thread_pool.h"
#include "ferry/ops/attention.h"

namespace ferry::ops {

Tensor attention_with_bias(const Tensor& q, const Tensor& k_in, const Tensor& v_in, const Tensor& bias,
                           int64_t q_offset, bool causal, float scale) {
  const char* op = "attention_with_bias";
  for (auto [name, t] : {std::pair{"q", &q}, std::pair{"k", &k_in}, std::pair{"v", &v_in}})
    if (!t->defined()) cpu::fail(op, fmt::format("{} is undefined", name));
  if (q.dtype() != DType::F32) cpu::fail(op, cpu::describe("q", q) + " must be f32", "convert it with .to(DType::F32)");
  if (q.dim() != 3 || k_in.dim() != 3 || v_in.dim() != 3)
    cpu::fail(op, fmt::format("{}, {}, {} must be [T, H, D], [S, H, D], [S, H, Dv]", cpu::describe("q", q),
                              cpu::describe("k", k_in), cpu::describe("v", v_in)));
  const int64_t T = q.size(0), H = q.size(1), D = q.size(2), S = k_in.size(0), Dv = v_in.size(2);
  if (k_in.size(1) != H || v_in.size(1) != H || k_in.size(2) != D || v_in.size(0) != S)
    cpu::fail(op, fmt::format("{}, {}, {}: heads, head_dim or keys disagree", cpu::describe("q", q),
                              cpu::describe("k", k_in), cpu::describe("v", v_in)));
  if (causal && (q_offset < 0 || S < q_offset + T))
    cpu::fail(op, fmt::format("the cache holds {} keys, but queries at positions {}..{} need {}", S, q_offset,
                              q_offset + T - 1, q_offset + T));
  if (bias.defined()) {
    if (bias.dtype() != DType::F32) cpu::fail(op, cpu::describe("bias", bias) + " must be f32");
    if (bias.dim() != 3 || bias.size(0) != H || bias.size(1) != T || bias.size(2) != S)
      cpu::fail(op, cpu::describe("bias", bias) + fmt::format(" must be [H, T, S] = [{}, {}, {}]", H, T, S));
  }
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(q)) return cuda::attention_with_bias(q, k_in, v_in, bias, q_offset, causal, scale);
  }
  // Another accelerator (no kernel of its own): computed on the host, the result copied back.
  if (!q.device().is_cpu()) {
    const Device d = q.device();
    const Tensor b = bias.defined() ? bias.to(Device::cpu()) : Tensor();
    return attention_with_bias(q.to(Device::cpu()), k_in.to(Device::cpu()), v_in.to(Device::cpu()), b, q_offset,
                               causal, scale)
        .to(d);
  }
  cpu::check_host(op, "q", q);
  for (const Tensor* t : {&k_in, &v_in, &bias})
    if (t->defined() && !t->device().is_cpu())
      cpu::fail(op, "q is on the cpu but another input is on " + t->device().str(), "keep q, k, v and bias together");
  const Tensor k = k_in.to(DType::F32), v = v_in.to(DType::F32);
  Tensor out = Tensor::empty({T, H, Dv}, DType::F32, q.device());
  const float* qp = q.data<float>();
  const float* kp = k.data<float>();
  const float* vp = v.data<float>();
  const float* bp = bias.defined() ? bias.data<float>() : nullptr;
  float* op_out = out.data<float>();
  parallel_for(0, T * H, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> scores(static_cast<std::size_t>(S));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / H, h = i % H;
      const int64_t n = causal ? q_offset + t + 1 : S;
      const float* qr = qp + (t * H + h) * D;
      float top = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        const float* kr = kp + (j * H + h) * D;
        float dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += qr[d] * kr[d];
        float s = scale * dot;
        if (bp) s += bp[(h * T + t) * S + j];
        scores[static_cast<std::size_t>(j)] = s;
        top = std::max(top, s);
      }
      float sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += scores[static_cast<std::size_t>(j)] = std::exp(scores[static_cast<std::size_t>(j)] - top);
      float* o = op_out + (t * H + h) * Dv;
      std::fill(o, o + Dv, 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        const float w = scores[static_cast<std::size_t>(j)] / sum;
        const float* vr = vp + (j * H + h) * Dv;
        for (int64_t d = 0; d < Dv; ++d) o[d] += w * vr[d];
      }
    }
  });
  return out;
}

}  // namespace ferry::ops
