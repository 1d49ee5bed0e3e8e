// Element-wise dtype conversion on a GPU (Tensor::to(dtype), Tensor::copy_from between dtypes, e.g. f32 activations
// into a bf16 KV cache). Float types only; the rounding is round-to-nearest-even like core/convert.cc. fp8 is read
// (weights stored as fp8) but never written here: writing fp8 has saturation choices, the host path makes them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstddef>
#include <cstdint>

#include "ferry/core/dtype.h"
#include "float_load.cuh"

namespace ferry::detail {
namespace {

template <class T>
__device__ __forceinline__ void store(T* p, std::size_t i, float v);
template <>
__device__ __forceinline__ void store<float>(float* p, std::size_t i, float v) { p[i] = v; }
template <>
__device__ __forceinline__ void store<__half>(__half* p, std::size_t i, float v) { p[i] = __float2half_rn(v); }
template <>
__device__ __forceinline__ void store<__nv_bfloat16>(__nv_bfloat16* p, std::size_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

template <class S, class D>
__global__ void convert_kernel(const S* src, D* dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    store(dst, i, cuda::ld(src, static_cast<int64_t>(i)));
}

template <class S, class D>
void launch(const void* src, void* dst, std::size_t n) {
  const unsigned threads = 256;
  const std::size_t want = (n + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(want < 65535 * 8 ? want : 65535 * 8);
  convert_kernel<S, D><<<blocks ? blocks : 1, threads>>>(static_cast<const S*>(src), static_cast<D*>(dst), n);
}

template <class S>
bool to_dst(const void* src, void* dst, DType dst_type, std::size_t n) {
  switch (dst_type) {
    case DType::F32: launch<S, float>(src, dst, n); return true;
    case DType::F16: launch<S, __half>(src, dst, n); return true;
    case DType::BF16: launch<S, __nv_bfloat16>(src, dst, n); return true;
    default: return false;
  }
}

}  // namespace

bool cuda_convert(const void* src, DType src_type, void* dst, DType dst_type, std::size_t n) {
  if (n == 0) return true;
  switch (src_type) {
    case DType::F32: return to_dst<float>(src, dst, dst_type, n);
    case DType::F16: return to_dst<__half>(src, dst, dst_type, n);
    case DType::BF16: return to_dst<__nv_bfloat16>(src, dst, dst_type, n);
    case DType::F8_E4M3FN: return to_dst<__nv_fp8_e4m3>(src, dst, dst_type, n);
    case DType::F8_E5M2: return to_dst<__nv_fp8_e5m2>(src, dst, dst_type, n);
    default: return false;
  }
}

}  // namespace ferry::detail
