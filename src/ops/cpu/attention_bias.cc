// ops::attention_with_bias on cpu (see attention.h). Many queries (a T5 encoder over its prompt): per head, the scores
// and the weighted sum of values are GEMMs (cpu::gemm, the linear layers' kernels) with the bias and softmax per row
// between them. Few queries (decode steps): one task per (head, query) through ops::attention's kernel
// (attention_kernels.h: vectorised q·k, the bias row added to the scaled scores, softmax, the weighted sum of values).
// Inputs on a GPU go to the CUDA kernel (cuda/attention.cu, the causal attention kernel with the bias added); inputs on
// another accelerator are computed here (copied to the host and back).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "attention_kernels.h"
#include "check.h"
#include "ferry/core/cpu_features.h"
#include "ferry/core/thread_pool.h"
#include "ferry/ops/attention.h"
#include "linear_kernels.h"
#include "norm_kernels.h"
#include "ops/cuda_ops.h"

namespace ferry::ops {
namespace {

// Query blocks at least this long (an encoder over its prompt, a prefill) go through the GEMM kernels; shorter ones
// (decode steps) through the attention kernel.
constexpr int64_t kGemmMinQueries = 16;
// Queries per GEMM block: bounds the scores buffer to kQueryBlock × S floats.
constexpr int64_t kQueryBlock = 256;

// Per head and block of queries: scores = q_h · k_hᵀ (cpu::gemm), each row scaled, biased, masked and softmaxed,
// then out_h = p · v_h (cpu::gemm). q, k, v, bias, out: f32, contiguous, [T, H, D] / [S, H, D] / [S, H, Dv] /
// [H, T, S] / [T, H, Dv].
void attend_by_gemm(const float* q, const float* k, const float* v, const float* bias, float* out, int64_t T, int64_t H,
                    int64_t D, int64_t S, int64_t Dv, int64_t q_offset, bool causal, float scale) {
  const Isa isa = cpu_isa();
  const cpu::NormKernels& norm = cpu::norm_kernels(isa);
  const int64_t tb = std::min(T, kQueryBlock);
  std::vector<float> kh(static_cast<std::size_t>(S * D)), vh(static_cast<std::size_t>(S * Dv)),
      qh(static_cast<std::size_t>(tb * D)), scores(static_cast<std::size_t>(tb * S)),
      oh(static_cast<std::size_t>(tb * Dv));
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t j = 0; j < S; ++j) {
      std::copy_n(k + (j * H + h) * D, D, kh.data() + j * D);
      std::copy_n(v + (j * H + h) * Dv, Dv, vh.data() + j * Dv);
    }
    for (int64_t t0 = 0; t0 < T; t0 += tb) {
      const int64_t m = std::min(tb, T - t0);
      for (int64_t t = 0; t < m; ++t) std::copy_n(q + ((t0 + t) * H + h) * D, D, qh.data() + t * D);
      cpu::gemm(isa, m, S, D, qh.data(), cpu::GemmRhs{DType::F32, kh.data(), true}, nullptr, scores.data());
      parallel_for(0, m, 8, [&](int64_t r0, int64_t r1) {
        for (int64_t t = r0; t < r1; ++t) {
          float* row = scores.data() + t * S;
          const int64_t n = causal ? std::min(S, q_offset + t0 + t + 1) : S;
          const float* b = bias ? bias + (h * T + t0 + t) * S : nullptr;
          for (int64_t j = 0; j < n; ++j) row[j] = row[j] * scale + (b ? b[j] : 0.0f);
          norm.softmax(row, row, n);
          std::fill(row + n, row + S, 0.0f);
        }
      });
      cpu::gemm(isa, m, Dv, S, scores.data(), cpu::GemmRhs{DType::F32, vh.data(), false}, nullptr, oh.data());
      for (int64_t t = 0; t < m; ++t) std::copy_n(oh.data() + t * Dv, Dv, out + ((t0 + t) * H + h) * Dv);
    }
  }
}

}  // namespace

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
  if (T == 0 || H == 0) return out;
  const cpu::AttendFn attend = cpu::attend_kernel(cpu_isa());
  const float* qp = q.data<float>();
  const float* kp = k.data<float>();
  const float* vp = v.data<float>();
  const float* bp = bias.defined() ? bias.data<float>() : nullptr;
  float* op_out = out.data<float>();
  if (T >= kGemmMinQueries) {
    attend_by_gemm(qp, kp, vp, bp, op_out, T, H, D, S, Dv, q_offset, causal, scale);
    return out;
  }
  // Tasks are (head, query), head-major: a thread's run of tasks walks one head's keys and values, which stay in
  // cache between its queries.
  parallel_for(0, H * T, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> scores(static_cast<std::size_t>(S));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t h = i / T, t = i % T;
      const int64_t n = causal ? q_offset + t + 1 : S;
      attend(qp + (t * H + h) * D, 1, kp + h * D, H * D, vp + h * Dv, H * Dv, DType::F32, D, Dv, n, scale, 0.0f,
             bp ? bp + (h * T + t) * S : nullptr, 0, scores.data(), op_out + (t * H + h) * Dv);
    }
  });
  return out;
}

}  // namespace ferry::ops
