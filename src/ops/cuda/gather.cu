// Embedding lookup and argmax on a GPU. Token ids are validated on the host before any row is read (the ids of one
// forward are few), so an id outside the vocabulary is the same ferry::Error as on cpu. argmax ranks NaN above
// every number and takes the lower index among equals, as torch.argmax and the cpu kernel do.
#include <vector>

#include "common.cuh"
#include "ops/cuda_ops.h"

namespace ferry::ops::cuda {
namespace {

template <class W>
__global__ void embedding_kernel(const W* weight, const int64_t* rows, float* out, int64_t n, int64_t D) {
  const int64_t total = n * D;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < total; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = k / D, d = k % D;
    out[k] = ld(weight, rows[r] * D + d);
  }
}

__device__ __forceinline__ bool above(float a, int64_t ia, float b, int64_t ib) {
  if (isnan(a) != isnan(b)) return isnan(a);
  if (!isnan(a) && a != b) return a > b;
  return ia < ib;  // equal (or both NaN): the lower index ranks above
}

__global__ void argmax_kernel(const float* x, int64_t* out, int64_t V) {
  __shared__ float best_v[32];
  __shared__ int64_t best_i[32];
  const float* row = x + blockIdx.x * V;
  float v = row[0];
  int64_t vi = 0;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x)
    if (above(row[i], i, v, vi)) v = row[i], vi = i;
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, vi, o);
    if (above(ov, oi, v, vi)) v = ov, vi = oi;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) best_v[warp] = v, best_i[warp] = vi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x >> 5); ++w)
      if (above(best_v[w], best_i[w], v, vi)) v = best_v[w], vi = best_i[w];
    out[blockIdx.x] = vi;
  }
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  const char* op = "embedding";
  check_gpu(op, "weight", weight, weight);
  if (!kernel_float(weight.dtype())) cpu::fail(op, cpu::describe("weight", weight) + " must be a float dtype");
  if (weight.dim() != 2) cpu::fail(op, cpu::describe("weight", weight) + " must be [vocab, dim]");
  if (!ids.defined() || (ids.dtype() != DType::I64 && ids.dtype() != DType::I32))
    cpu::fail(op, cpu::describe("ids", ids) + " must be i64 (or i32) token ids");
  const int64_t V = weight.size(0), D = weight.size(1), n = ids.numel();
  const std::vector<int64_t> rows = ids.to_vector<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    if (rows[std::size_t(i)] < 0 || rows[std::size_t(i)] >= V)
      cpu::fail(op,
                format_message("token id {} (at index {} of {}) is outside the vocabulary [0, {})", rows[std::size_t(i)], i,
                            cpu::describe("ids", ids), V),
                "does the tokenizer belong to this model? check vocab_size in config.json");
  Shape shape = ids.shape();
  shape.push_back(D);
  Tensor out = Tensor::empty(shape, DType::F32, weight.device());
  if (n == 0 || D == 0) return out;
  const Tensor dev_rows = Tensor::from_vector(rows, {n}).to(weight.device());
  set_device(weight);
  with_float_type(op, weight.dtype(), [&](auto tag) {
    using W = decltype(tag);
    embedding_kernel<W><<<grid_for(n * D, 256), 256>>>(static_cast<const W*>(weight.raw_data()),
                                                        dev_rows.data<int64_t>(), out.data<float>(), n, D);
  });
  check_launch(op);
  return out;
}

Tensor argmax(const Tensor& x) {
  check_gpu_f32("argmax", "x", x, x);
  cpu::check_min_dim("argmax", "x", x, 1);
  const int64_t V = x.size(-1);
  if (V == 0) cpu::fail("argmax", cpu::describe("x", x) + " has an empty last dimension");
  Tensor out = Tensor::empty(Shape(x.shape().begin(), x.shape().end() - 1), DType::I64, x.device());
  const int64_t rows = x.numel() / V;
  if (rows == 0) return out;
  set_device(x);
  argmax_kernel<<<static_cast<unsigned>(rows), 256>>>(x.data<float>(), out.data<int64_t>(), V);
  check_launch("argmax");
  return out;
}

}  // namespace ferry::ops::cuda
