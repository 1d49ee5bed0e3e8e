// Shared pieces of the CUDA kernels: error checks that become ferry::Error, element loads of every float dtype as
// f32, warp/block reductions, and the argument checks that mirror the cpu ops' (cpu/check.h) for device tensors.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "../cpu/check.h"
#include "core/cuda/float_load.cuh"
#include "ferry/core/error.h"
#include "ferry/core/tensor.h"

namespace ferry::ops::cuda {

// ---- messages ----------------------------------------------------------------------------------------------------
// nvcc cannot compile fmt 9's headers (consteval format strings), so the .cu files format their few error messages
// with this: each "{}" takes the next argument (strings as they are, numbers through std::to_string).

inline std::string to_text(const std::string& s) { return s; }
inline std::string to_text(const char* s) { return s; }
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
std::string to_text(T v) {
  return std::to_string(v);
}

template <class... Args>
std::string format_message(std::string_view pattern, const Args&... args) {
  const std::string texts[] = {to_text(args)..., std::string()};
  std::string out;
  std::size_t next = 0, at = 0;
  for (std::size_t p; (p = pattern.find("{}", at)) != std::string_view::npos; at = p + 2) {
    out.append(pattern.substr(at, p - at));
    out += next < sizeof...(Args) ? texts[next++] : std::string("{}");
  }
  out.append(pattern.substr(at));
  return out;
}

/// Throws ferry::Error naming the op when the last launch (or an earlier asynchronous error) failed.
inline void check_launch(const char* op) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(std::string("CUDA kernel failed: ") + cudaGetErrorString(err), std::string("ops::") + op + " (cuda)",
                "run scripts/device-check for the CUDA tests; set CUDA_LAUNCH_BLOCKING=1 to find the kernel");
}

inline void set_device(const Tensor& t) { cudaSetDevice(t.device().index); }

/// t is defined, on a GPU, and on the same GPU as `like`.
inline void check_gpu(const char* op, const char* name, const Tensor& t, const Tensor& like) {
  if (!t.defined()) cpu::fail(op, std::string(name) + " is undefined");
  if (t.device() != like.device())
    cpu::fail(op, cpu::describe(name, t) + " is not on " + like.device().str(),
              "move every argument to the same device first (ops never move data)");
}
inline void check_gpu_f32(const char* op, const char* name, const Tensor& t, const Tensor& like) {
  check_gpu(op, name, t, like);
  if (t.dtype() != DType::F32) cpu::fail(op, cpu::describe(name, t) + " must be f32");
}
/// Weights and norm parameters: one of the float types the kernels read.
inline bool kernel_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F8_E4M3FN || t == DType::F8_E5M2;
}

// ---- loads as f32: ld<T>(p, i), shared with core's conversion kernel ------------------------------------------

using ferry::cuda::ld;

/// Calls f(T{}) with the CUDA element type of a float dtype (host side).
template <class F>
void with_float_type(const char* op, DType t, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return;
    case DType::F16: f(__half{}); return;
    case DType::BF16: f(__nv_bfloat16{}); return;
    case DType::F8_E4M3FN: f(__nv_fp8_e4m3{}); return;
    case DType::F8_E5M2: f(__nv_fp8_e5m2{}); return;
    default: cpu::fail(op, std::string("dtype ") + std::string(dtype_name(t)) + " has no CUDA kernel");
  }
}

// ---- reductions -------------------------------------------------------------------------------------------------

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
/// Sum over the block (blockDim.x a multiple of 32, ≤ 1024); every thread gets the result. `scratch`: 33 floats.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < warps ? scratch[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) scratch[32] = s;
  }
  __syncthreads();
  return scratch[32];
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < warps ? scratch[lane] : -INFINITY;
    s = warp_max(s);
    if (lane == 0) scratch[32] = s;
  }
  __syncthreads();
  return scratch[32];
}

/// Grid size for a grid-stride loop over n elements.
inline unsigned grid_for(int64_t n, unsigned threads) {
  const int64_t want = (n + threads - 1) / threads;
  return static_cast<unsigned>(want < 1 ? 1 : (want > 65535 * 16 ? 65535 * 16 : want));
}

/// Rows of a [..., D] tensor.
inline int64_t rows_of(const Tensor& t) { return t.dim() == 0 ? 1 : t.numel() / (t.size(-1) ? t.size(-1) : 1); }

}  // namespace ferry::ops::cuda
