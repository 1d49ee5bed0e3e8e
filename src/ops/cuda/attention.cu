// Grouped-query attention over a KV cache on a GPU, one fused kernel for decode and prefill: a block per (query
// token, query head); its warps split the visible keys and keep an online softmax each (running max, sum and
// weighted value sum, as in FlashAttention), merged at the end in shared memory. Scores, softmax and sums are f32;
// the cache is read in its dtype (f32, f16, bf16). Query head h reads kv head h / (Hq / Hkv) in place, and keys
// outside the causal (and sliding) window are never read, exactly as the cpu kernel (cpu/attention.cc).
// The same kernel serves attention_with_bias (T5): an optional [H, T, S] f32 bias added to each scaled score, and
// a non-causal mode in which every query sees all S keys (the encoder and cross-attention).
//
// Not yet the tiled prefill kernel the issue asks for: each (token, head) block re-reads its keys from L2, which
// is correct for every shape and fast enough for the prompts the benchmarks use; tiling queries is the next step.
#include <algorithm>

#include "common.cuh"
#include "ops/cuda_ops.h"

namespace ferry::ops::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxPerLane = 8;  // head_dim ≤ 256

template <class KV>
__global__ void __launch_bounds__(kWarps * 32)
    attention_kernel(const float* __restrict__ q, const KV* __restrict__ k, const KV* __restrict__ v,
                     const float* __restrict__ bias, float* __restrict__ out, int64_t T, int64_t Hq, int64_t Hkv,
                     int64_t S, int64_t D, int64_t Dv, int64_t q_offset, float scale, int64_t window, bool causal,
                     float softcap) {
  __shared__ float part_m[kWarps], part_l[kWarps];
  __shared__ float part_acc[kWarps][kMaxPerLane * 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = blockIdx.x / Hq, h = blockIdx.x % Hq, kvh = h / (Hq / Hkv);
  const int64_t pos = q_offset + t;
  const int64_t hi = causal ? pos : S - 1;  // the last key this query sees
  const int64_t lo = causal && window > 0 ? max(int64_t(0), pos - window + 1) : 0;
  const float* brow = bias ? bias + (h * T + t) * S : nullptr;

  float qr[kMaxPerLane];
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int64_t d = lane + 32 * i;
    qr[i] = d < D ? q[(t * Hq + h) * D + d] : 0.0f;
  }
  float m = -INFINITY, l = 0.0f, acc[kMaxPerLane];
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) acc[i] = 0.0f;

  for (int64_t j = lo + warp; j <= hi; j += kWarps) {
    const KV* kr = k + (j * Hkv + kvh) * D;
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int64_t d = lane + 32 * i;
      if (d < D) dot += qr[i] * ld(kr, d);
    }
    float s = warp_sum(dot) * scale;
    if (softcap > 0.0f) s = tanhf(s / softcap) * softcap;  // Gemma 2's attn_logit_softcapping, before any bias
    s += brow ? brow[j] : 0.0f;
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new);  // 0 for the first key (m = -inf)
    const float p = expf(s - m_new);
    l = l * corr + p;
    const KV* vr = v + (j * Hkv + kvh) * Dv;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int64_t d = lane + 32 * i;
      acc[i] = acc[i] * corr + (d < Dv ? p * ld(vr, d) : 0.0f);
    }
    m = m_new;
  }

  if (lane == 0) part_m[warp] = m, part_l[warp] = l;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) part_acc[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, part_m[w]);
  float L = 0.0f;
  for (int w = 0; w < kWarps; ++w)
    if (part_l[w] > 0.0f) L += part_l[w] * expf(part_m[w] - M);
  for (int64_t d = threadIdx.x; d < Dv; d += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (part_l[w] > 0.0f) o += part_acc[w][d] * expf(part_m[w] - M);
    out[(t * Hq + h) * Dv + d] = L > 0.0f ? o / L : 0.0f;  // no visible key (S = 0): zeros, as on the cpu
  }
}

// Shapes, dtypes and positions were checked by the public op (cpu/attention.cc, cpu/attention_bias.cc) before
// it came here: devices and the kernel's own limits are left.
Tensor run_attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                     int64_t q_offset, float scale, int64_t sliding_window, bool causal, float softcap = 0.0f) {
  check_gpu(op, "k", k, q);
  check_gpu(op, "v", v, q);
  if (bias.defined()) check_gpu_f32(op, "bias", bias, q);
  if (k.dtype() != v.dtype())
    cpu::fail(op, format_message("{}, {}: the CUDA kernel reads k and v in one dtype", cpu::describe("k", k),
                                 cpu::describe("v", v)));
  const int64_t T = q.size(0), Hq = q.size(1), D = q.size(2), S = k.size(0), Hkv = k.size(1), Dv = v.size(2);
  const std::string shapes = format_message("{}, {}, {}", cpu::describe("q", q), cpu::describe("k", k), cpu::describe("v", v));
  if (D > 32 * kMaxPerLane || Dv > 32 * kMaxPerLane)
    cpu::fail(op, shapes + format_message(": the CUDA kernel supports head_dim up to {}", 32 * kMaxPerLane));
  Tensor out = Tensor::empty({T, Hq, Dv}, DType::F32, q.device());
  if (T == 0 || Hq == 0 || Dv == 0) return out;
  if (T * Hq > INT32_MAX) cpu::fail(op, shapes + ": too many query rows for one launch");
  set_device(q);
  with_float_type(op, k.dtype(), [&](auto tag) {
    using KV = decltype(tag);
    attention_kernel<KV>
        <<<static_cast<unsigned>(T * Hq), kWarps * 32>>>(q.data<float>(), static_cast<const KV*>(k.raw_data()),
                                                         static_cast<const KV*>(v.raw_data()),
                                                         bias.defined() ? bias.data<float>() : nullptr,
                                                         out.data<float>(), T, Hq, Hkv, S, D, Dv, q_offset, scale,
                                                         sliding_window, causal, softcap);
  });
  check_launch(op);
  return out;
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_offset, float scale,
                 int64_t sliding_window, float softcap) {
  return run_attention("attention", q, k, v, Tensor(), q_offset, scale, sliding_window, /*causal=*/true, softcap);
}

Tensor attention_with_bias(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, int64_t q_offset,
                           bool causal, float scale) {
  return run_attention("attention_with_bias", q, k, v, bias, q_offset, scale, 0, causal);
}

}  // namespace ferry::ops::cuda
