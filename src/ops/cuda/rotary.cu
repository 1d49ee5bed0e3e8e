// Rotary position embeddings on a GPU, in place on q or k [T, H, D]: one thread per (token, head, pair). Angles in
// f32 as `position · inv_freq[i]` like transformers, then x·cos + rotate(x)·sin, both layouts of ops/rotary.h.
#include "common.cuh"
#include "ops/cuda_ops.h"

namespace ferry::ops::cuda {
namespace {

__global__ void rope_kernel(float* x, const int64_t* pos, const float* inv_freq, int64_t T, int64_t H, int64_t D,
                            int64_t half, bool interleaved, float scaling) {
  const int64_t n = T * H * half;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k % half, th = k / half, t = th / H;
    const float angle = static_cast<float>(pos[t]) * inv_freq[i];
    const float c = cosf(angle) * scaling, s = sinf(angle) * scaling;
    float* head = x + th * D;
    const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
    const float x1 = head[a], x2 = head[b];
    head[a] = x1 * c - x2 * s;
    head[b] = x2 * c + x1 * s;
  }
}

}  // namespace

void apply_rotary_(Tensor& x, const Tensor& positions, const Tensor& inv_freq, RopeLayout layout,
                   float attention_scaling) {
  const char* op = "apply_rotary_";
  check_gpu_f32(op, "x", x, x);
  cpu::check_writable(op, "x", x);
  if (x.dim() != 3) cpu::fail(op, cpu::describe("x", x) + " must be [tokens, heads, head_dim]");
  if (!positions.defined() || positions.dtype() != DType::I64 || positions.dim() != 1 || positions.size(0) != x.size(0))
    cpu::fail(op, format_message("{} must be i64 [{}] (one position per token of {})",
                              cpu::describe("positions", positions), x.size(0), cpu::describe("x", x)));
  if (!inv_freq.defined() || inv_freq.dtype() != DType::F32 || inv_freq.dim() != 1 || 2 * inv_freq.numel() > x.size(2))
    cpu::fail(op, format_message("{} needs shape [R/2] f32 with rotary_dim R ≤ head_dim {}",
                              cpu::describe("inv_freq", inv_freq), x.size(2)),
              "build it with rope_inv_freq(rotary_dim, theta)");
  // Positions and frequencies are small: they may come from the host (the model makes them there).
  const Tensor pos = positions.to(x.device()), freq = inv_freq.to(x.device());
  const int64_t T = x.size(0), H = x.size(1), D = x.size(2), half = freq.numel();
  if (T == 0 || H == 0 || half == 0) return;
  set_device(x);
  rope_kernel<<<grid_for(T * H * half, 256), 256>>>(x.data<float>(), pos.data<int64_t>(), freq.data<float>(), T, H, D,
                                                   half, layout == RopeLayout::Interleaved, attention_scaling);
  check_launch(op);
}

}  // namespace ferry::ops::cuda
