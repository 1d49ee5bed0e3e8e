// Causal grouped-query attention over a KV cache on cpu (see attention.h): argument checks, the split into
// (token, kv head, query heads) tasks on the thread pool, and the scalar kernel. Like transformers' eager attention, the
// scores are scale·q·kᵀ and softmax runs in f32; masked positions are simply not visited, so a query never
// sees a future key or one outside its sliding window.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "attention_kernels.h"
#include "check.h"
#include "ops/cuda_ops.h"
#include "ferry/core/thread_pool.h"
#include "ferry/ops/attention.h"
#include "norm_kernels.h"
#include "to_f32.h"

namespace ferry::ops {
namespace cpu {
namespace scalar {

void attend(const float* q, int64_t heads, const void* k, int64_t k_stride, const void* v, int64_t v_stride, DType kv,
            int64_t D, int64_t Dv, int64_t n, float scale, float softcap, const float* bias, int64_t bias_stride,
            float* scores, float* out) {
  for (int64_t h = 0; h < heads; ++h, q += D, out += Dv) {
    for (int64_t j = 0; j < n; ++j) {
      float dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += q[d] * load_f32(kv, k, j * k_stride + d);
      scores[j] = dot * scale;
      if (bias) scores[j] += bias[h * bias_stride + j];
    }
    softcap_scores(scores, n, softcap);
    softmax(scores, scores, n);
    for (int64_t d = 0; d < Dv; ++d) out[d] = 0;
    for (int64_t j = 0; j < n; ++j)
      for (int64_t d = 0; d < Dv; ++d) out[d] += scores[j] * load_f32(kv, v, j * v_stride + d);
  }
}

}  // namespace scalar

void softcap_scores(float* scores, int64_t n, float softcap) {
  if (softcap <= 0.0f) return;
  for (int64_t j = 0; j < n; ++j) scores[j] = std::tanh(scores[j] / softcap) * softcap;  // transformers' order
}

AttendFn attend_kernel(Isa isa) {
#if FERRY_X86_KERNELS
  if (isa >= Isa::AVX2) return avx2::attend;
#endif
  (void)isa;
  return scalar::attend;
}

}  // namespace cpu

namespace {

// Shapes, dtypes and positions: checked before the tensors' device decides whose kernel runs (cpu or cuda).
void check_cache(const char* name, const Tensor& t) {
  if (t.dtype() != DType::F32 && t.dtype() != DType::F16 && t.dtype() != DType::BF16)
    cpu::fail("attention", cpu::describe(name, t) + " has an unsupported cache dtype", "use f32, f16 or bf16");
  if (t.dim() != 3) cpu::fail("attention", cpu::describe(name, t) + " must be [keys, kv_heads, head_dim]");
}

void check_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_offset, int64_t sliding_window) {
  for (auto [name, t] : {std::pair{"q", &q}, std::pair{"k", &k}, std::pair{"v", &v}})
    if (!t->defined()) cpu::fail("attention", fmt::format("{} is undefined", name));
  if (q.dtype() != DType::F32)
    cpu::fail("attention", cpu::describe("q", q) + " must be f32", "convert it with .to(DType::F32)");
  if (q.dim() != 3) cpu::fail("attention", cpu::describe("q", q) + " must be [tokens, heads, head_dim]");
  check_cache("k", k);
  check_cache("v", v);
  const int64_t T = q.size(0), Hq = q.size(1), D = q.size(2), S = k.size(0), Hkv = k.size(1);
  const std::string shapes = fmt::format("{}, {}, {}", cpu::describe("q", q), cpu::describe("k", k), cpu::describe("v", v));
  if (k.dtype() != v.dtype() || v.size(0) != S || v.size(1) != Hkv)
    cpu::fail("attention", shapes + ": k and v must have the same dtype, keys and kv heads");
  if (k.size(2) != D) cpu::fail("attention", shapes + ": q and k head_dim differ");
  if (Hkv == 0 || Hq % Hkv != 0)
    cpu::fail("attention", shapes + fmt::format(": kv heads ({}) must divide query heads ({})", Hkv, Hq));
  if (q_offset < 0 || sliding_window < 0)
    cpu::fail("attention", fmt::format("q_offset {} and sliding_window {} must not be negative", q_offset, sliding_window));
  if (S < q_offset + T)
    cpu::fail("attention",
              shapes + fmt::format(": the cache holds {} keys, but queries at positions {}..{} need {}", S, q_offset,
                                   q_offset + T - 1, q_offset + T),
              "append the new tokens' keys and values to the cache before attending");
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_offset, float scale,
                 int64_t sliding_window, float softcap) {
  check_attention(q, k, v, q_offset, sliding_window);
  if (!(softcap >= 0.0f)) cpu::fail("attention", fmt::format("softcap {} must be ≥ 0 (0: no soft-capping)", softcap));
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(q)) return cuda::attention(q, k, v, q_offset, scale, sliding_window, softcap);
  }
  for (auto [name, t] : {std::pair{"q", &q}, std::pair{"k", &k}, std::pair{"v", &v}}) {
    cpu::check_host("attention", name, *t);
    cpu::check_same_device("attention", "q", q, name, *t);
  }
  const int64_t T = q.size(0), Hq = q.size(1), D = q.size(2), S = k.size(0), Hkv = k.size(1), Dv = v.size(2);
  Tensor out = Tensor::empty({T, Hq, Dv}, DType::F32, q.device());
  if (T == 0 || Hq == 0) return out;
  const cpu::AttendFn attend = cpu::attend_kernel(cpu_isa());
  const int64_t group = Hq / Hkv, k_stride = Hkv * D, v_stride = Hkv * Dv;
  const std::size_t esize = dtype_size(k.dtype());
  const auto* kp = static_cast<const char*>(k.raw_data());
  const auto* vp = static_cast<const char*>(v.raw_data());
  const float* qp = q.data<float>();
  float* op = out.data<float>();
  // Tasks are (token, kv head, slice of its query heads). Whole groups share each cache row read; when that
  // leaves fewer than ~4 tasks per thread (decode with few kv heads) the groups are split.
  int64_t slice = group;
  while (slice % 2 == 0 && T * Hkv * (group / slice) < 4 * num_threads()) slice /= 2;
  const int64_t slices = group / slice;
  parallel_for(0, T * Hkv * slices, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> scores(static_cast<std::size_t>(S * slice));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / (Hkv * slices), kvh = i / slices % Hkv, h0 = kvh * group + i % slices * slice;
      const int64_t pos = q_offset + t;
      const int64_t lo = sliding_window > 0 ? std::max<int64_t>(0, pos - sliding_window + 1) : 0;
      const int64_t n = pos - lo + 1;
      const char* krow = kp + static_cast<std::size_t>(lo * k_stride + kvh * D) * esize;
      const char* vrow = vp + static_cast<std::size_t>(lo * v_stride + kvh * Dv) * esize;
      attend(qp + (t * Hq + h0) * D, slice, krow, k_stride, vrow, v_stride, k.dtype(), D, Dv, n, scale, softcap,
             nullptr, 0, scores.data(), op + (t * Hq + h0) * Dv);
    }
  });
  return out;
}

}  // namespace ferry::ops
