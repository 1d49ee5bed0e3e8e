// Loads of every float element type a GPU kernel reads (f32, f16, bf16, both fp8), as f32. Shared by core's
// dtype conversion (convert.cu) and the ops' kernels (src/ops/cuda/common.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace ferry::cuda {

template <class T>
__device__ __forceinline__ float ld(const T* p, int64_t i);
template <>
__device__ __forceinline__ float ld<float>(const float* p, int64_t i) { return p[i]; }
template <>
__device__ __forceinline__ float ld<__half>(const __half* p, int64_t i) { return __half2float(p[i]); }
template <>
__device__ __forceinline__ float ld<__nv_bfloat16>(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
template <>
__device__ __forceinline__ float ld<__nv_fp8_e4m3>(const __nv_fp8_e4m3* p, int64_t i) { return static_cast<float>(p[i]); }
template <>
__device__ __forceinline__ float ld<__nv_fp8_e5m2>(const __nv_fp8_e5m2* p, int64_t i) { return static_cast<float>(p[i]); }

}  // namespace ferry::cuda
