// linear and matmul on a GPU. Activations stay f32 as on cpu; weights are read in their stored dtype.
//
//   T ≤ 8 rows (decode, small batches): a GEMV kernel, one warp per output feature, 16-byte weight loads converted
//   to f32 in registers and dotted with every row of x, so each weight byte crosses HBM once per call. Exact f32
//   accumulation, like the cpu GEMV.
//   more rows (prefill): cuBLAS. cuBLAS multiplies bf16 (f16) by bf16 (f16) only, so x is split into a high and a
//   low part in the weight's dtype (x = hi + lo, both exactly representable): two GEMMs with f32 accumulation give
//   about 16 bits of x's mantissa instead of bf16's 8, close to the cpu path's f32 activations. f32 weights use
//   SGEMM (no TF32); fp8 weights are widened to bf16 first (layerwise casting; cuBLASLt's fp8 GEMM is not used yet).
#include <cublas_v2.h>
#include <array>
#include <mutex>

#include "common.cuh"
#include "ops/cuda_ops.h"

namespace ferry::ops::cuda {
namespace {

constexpr int kGemvMaxRows = 8;
constexpr int kGemvThreads = 256;  // 8 warps: 8 output features per block
constexpr int kGemvLoads = 4;      // 16-byte weight loads each lane has in flight

// ---- cuBLAS handles, one per device, on the legacy default stream -----------------------------------------------

cublasHandle_t blas_handle(int device) {
  static std::mutex mu;
  static std::array<cublasHandle_t, 16> handles{};
  if (device < 0 || device >= 16) throw Error("no such device", "cuda:" + std::to_string(device));
  std::lock_guard lock(mu);
  if (!handles[device]) {
    cudaSetDevice(device);
    if (cublasCreate(&handles[device]) != CUBLAS_STATUS_SUCCESS)
      throw Error("cublasCreate failed", "cuda:" + std::to_string(device), "is the GPU out of memory?");
  }
  return handles[device];
}

void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string(what) + " failed: " + cublasGetStatusString(s), "ops::linear (cuda)");
}

// ---- GEMV -------------------------------------------------------------------------------------------------------

// The 16 / sizeof(W) weights of one 16-byte load, as f32.
template <class W>
__device__ __forceinline__ void unpack(const uint4& raw, float* out);
template <>
__device__ __forceinline__ void unpack<float>(const uint4& raw, float* out) {
  out[0] = __uint_as_float(raw.x), out[1] = __uint_as_float(raw.y), out[2] = __uint_as_float(raw.z),
  out[3] = __uint_as_float(raw.w);
}
template <>
__device__ __forceinline__ void unpack<__nv_bfloat16>(const uint4& raw, float* out) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(words[i] << 16);
    out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}
template <>
__device__ __forceinline__ void unpack<__half>(const uint4& raw, float* out) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __half2 h;
    memcpy(&h, &words[i], 4);
    const float2 f = __half22float2(h);
    out[2 * i] = f.x, out[2 * i + 1] = f.y;
  }
}
template <class F8>
__device__ __forceinline__ void unpack_fp8(const uint4& raw, float* out) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    F8 v;
    v.__x = static_cast<__nv_fp8_storage_t>((words[i / 4] >> (8 * (i % 4))) & 0xffu);
    out[i] = static_cast<float>(v);
  }
}
template <>
__device__ __forceinline__ void unpack<__nv_fp8_e4m3>(const uint4& raw, float* out) { unpack_fp8<__nv_fp8_e4m3>(raw, out); }
template <>
__device__ __forceinline__ void unpack<__nv_fp8_e5m2>(const uint4& raw, float* out) { unpack_fp8<__nv_fp8_e5m2>(raw, out); }

// acc[t] += the 16 / sizeof(W) weights of chunk c (16 bytes, `raw`) · the same columns of x's row t, t < T.
template <class W, int MAXT>
__device__ __forceinline__ void dot_chunk(const uint4& raw, const float* __restrict__ x, int64_t K, int64_t c, int T,
                                          float* acc) {
  constexpr int E = 16 / sizeof(W);
  float wf[E];
  unpack<W>(raw, wf);
#pragma unroll
  for (int t = 0; t < MAXT; ++t) {
    if (t < T) {
      const float4* xt = reinterpret_cast<const float4*>(x + t * K + c * E);
#pragma unroll
      for (int e = 0; e < E; e += 4) {
        const float4 xv = __ldg(xt + e / 4);
        acc[t] += wf[e] * xv.x + wf[e + 1] * xv.y + wf[e + 2] * xv.z + wf[e + 3] * xv.w;
      }
    }
  }
}

// y[t, n] = Σ_k w[n, k] · x[t, k] + bias[n] for t < T ≤ MAXT. `vec`: rows are 16-byte aligned and K is a multiple of
// 16 / sizeof(W), so the weights stream in 16-byte loads.
template <class W, int MAXT>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(const W* __restrict__ w, const float* __restrict__ x,
                                                            const float* __restrict__ bias, float* __restrict__ y,
                                                            int64_t N, int64_t K, int T, bool vec) {
  const int lane = threadIdx.x & 31;
  const int64_t n = int64_t(blockIdx.x) * (kGemvThreads / 32) + (threadIdx.x >> 5);
  if (n >= N) return;
  const W* row = w + n * K;
  float acc[MAXT];
#pragma unroll
  for (int t = 0; t < MAXT; ++t) acc[t] = 0.0f;
  constexpr int E = 16 / sizeof(W);
  int64_t done = 0;
  if (vec) {
    // Each lane keeps kGemvLoads 16-byte weight loads in flight before it uses them: one load at a time left
    // each warp waiting out the HBM latency per 512 bytes (a TinyLlama decode ran at 0.16 of the read bound on an
    // H200).
    const uint4* r4 = reinterpret_cast<const uint4*>(row);
    const int64_t chunks = K / E;
    int64_t c = lane;
    for (; c + 32 * (kGemvLoads - 1) < chunks; c += 32 * kGemvLoads) {
      uint4 raw[kGemvLoads];
#pragma unroll
      for (int u = 0; u < kGemvLoads; ++u) raw[u] = __ldg(r4 + c + 32 * u);
#pragma unroll
      for (int u = 0; u < kGemvLoads; ++u) dot_chunk<W, MAXT>(raw[u], x, K, c + 32 * u, T, acc);
    }
    for (; c < chunks; c += 32) dot_chunk<W, MAXT>(__ldg(r4 + c), x, K, c, T, acc);
    done = chunks * E;
  }
  for (int64_t k = done + lane; k < K; k += 32) {
    const float wv = ld(row, k);
#pragma unroll
    for (int t = 0; t < MAXT; ++t)
      if (t < T) acc[t] += wv * x[t * K + k];
  }
#pragma unroll
  for (int t = 0; t < MAXT; ++t) {
    if (t < T) {
      const float s = warp_sum(acc[t]);
      if (lane == 0) y[t * N + n] = s + (bias ? bias[n] : 0.0f);
    }
  }
}

template <class W>
void launch_gemv(const void* w, const float* x, const float* bias, float* y, int64_t N, int64_t K, int T, bool vec) {
  const unsigned blocks = static_cast<unsigned>((N + kGemvThreads / 32 - 1) / (kGemvThreads / 32));
  const W* wp = static_cast<const W*>(w);
  if (T == 1) gemv_kernel<W, 1><<<blocks, kGemvThreads>>>(wp, x, bias, y, N, K, T, vec);
  else if (T == 2) gemv_kernel<W, 2><<<blocks, kGemvThreads>>>(wp, x, bias, y, N, K, T, vec);
  else if (T <= 4) gemv_kernel<W, 4><<<blocks, kGemvThreads>>>(wp, x, bias, y, N, K, T, vec);
  else gemv_kernel<W, 8><<<blocks, kGemvThreads>>>(wp, x, bias, y, N, K, T, vec);
}

// ---- GEMM through cuBLAS ------------------------------------------------------------------------------------------

__device__ __forceinline__ __nv_bfloat16 round_to(float v, __nv_bfloat16) { return __float2bfloat16_rn(v); }
__device__ __forceinline__ __half round_to(float v, __half) { return __float2half_rn(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }

// x = hi + lo, both in the 16-bit type H: hi is x rounded, lo the rounded remainder.
template <class H>
__global__ void split_kernel(const float* x, H* hi, H* lo, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const H h = round_to(x[i], H{});
    hi[i] = h;
    lo[i] = round_to(x[i] - widen(h), H{});
  }
}

__global__ void add_bias_kernel(float* y, const float* bias, int64_t rows, int64_t N) {
  const int64_t n = rows * N;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += bias[i % N];
}

// y [T, N] (row-major) = x [T, K] · w [N, K]ᵀ. Column-major view: yᵀ (N × T) = op_T(w as K × N) · xᵀ (K × T).
void gemm_16bit(cublasHandle_t h, DType wt, const void* w, const float* x, float* y, int64_t T, int64_t N, int64_t K,
                Device device) {
  const DType half_type = wt;  // F16 or BF16
  Tensor hi = Tensor::empty({T, K}, half_type, device), lo = Tensor::empty({T, K}, half_type, device);
  const cudaDataType_t ct = wt == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
  if (wt == DType::BF16)
    split_kernel<__nv_bfloat16><<<grid_for(T * K, 256), 256>>>(x, static_cast<__nv_bfloat16*>(hi.raw_data()),
                                                                static_cast<__nv_bfloat16*>(lo.raw_data()), T * K);
  else
    split_kernel<__half><<<grid_for(T * K, 256), 256>>>(x, static_cast<__half*>(hi.raw_data()),
                                                         static_cast<__half*>(lo.raw_data()), T * K);
  check_launch("linear");
  const float one = 1.0f, zero = 0.0f;
  for (int part = 0; part < 2; ++part) {
    check_blas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(T), int(K), &one, w, ct, int(K),
                            part == 0 ? hi.raw_data() : lo.raw_data(), ct, int(K), part == 0 ? &zero : &one, y,
                            CUDA_R_32F, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
  }
}

void run_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out) {
  const int64_t K = weight.size(1), N = weight.size(0);
  const int64_t rows = x.numel() / (K ? K : 1);
  if (rows == 0 || N == 0) return;
  if (K > INT32_MAX || N > INT32_MAX || rows > INT32_MAX)
    cpu::fail("linear", cpu::describe("weight", weight) + " is too large for one CUDA GEMM");
  set_device(x);
  const Tensor b = bias.defined() ? bias.to(DType::F32) : bias;  // [N], converted on the device
  const float* bp = b.defined() ? b.data<float>() : nullptr;
  const float* xp = x.data<float>();
  float* yp = out.data<float>();
  if (K == 0) {  // an empty dot product: y = bias (or 0)
    cudaMemsetAsync(yp, 0, out.nbytes(), cudaStreamLegacy);
    if (bp) add_bias_kernel<<<grid_for(rows * N, 256), 256>>>(yp, bp, rows, N);
    check_launch("linear");
    return;
  }
  if (rows <= kGemvMaxRows) {
    const std::size_t vec_bytes = 16;
    const bool vec = reinterpret_cast<uintptr_t>(weight.raw_data()) % vec_bytes == 0 &&
                     (K * int64_t(dtype_size(weight.dtype()))) % int64_t(vec_bytes) == 0 &&
                     reinterpret_cast<uintptr_t>(xp) % 16 == 0;
    with_float_type("linear", weight.dtype(), [&](auto tag) {
      launch_gemv<decltype(tag)>(weight.raw_data(), xp, bp, yp, N, K, int(rows), vec);
    });
    check_launch("linear");
    return;
  }
  cublasHandle_t h = blas_handle(x.device().index);
  const DType wt = weight.dtype();
  if (wt == DType::F32) {
    const float one = 1.0f, zero = 0.0f;
    check_blas(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(rows), int(K), &one, weight.data<float>(), int(K),
                           xp, int(K), &zero, yp, int(N)),
               "cublasSgemm");
  } else if (wt == DType::F16 || wt == DType::BF16) {
    gemm_16bit(h, wt, weight.raw_data(), xp, yp, rows, N, K, x.device());
  } else {  // fp8: widen to bf16 on the device (layerwise casting), then as bf16
    const Tensor wide = weight.to(DType::BF16);
    gemm_16bit(h, DType::BF16, wide.raw_data(), xp, yp, rows, N, K, x.device());
  }
  if (bp) add_bias_kernel<<<grid_for(rows * N, 256), 256>>>(yp, bp, rows, N);
  check_launch("linear");
}

// Shapes and dtypes were checked by ops::linear (cpu/linear.cc) before it came here: only devices are left.
void check_weight(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_gpu("linear", "weight", weight, x);
  if (bias.defined()) check_gpu("linear", "bias", bias, x);
}

Shape out_shape(const Tensor& x, const Tensor& weight) {
  Shape s = x.shape();
  s.back() = weight.size(0);
  return s;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_weight(x, weight, bias);
  Tensor out = Tensor::empty(out_shape(x, weight), DType::F32, x.device());
  run_linear(x, weight, bias, out);
  return out;
}

void linear_into(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out) {
  check_weight(x, weight, bias);
  check_gpu_f32("linear", "out", out, x);
  if (out.shape() != out_shape(x, weight))
    cpu::fail("linear", cpu::describe("out", out) + " must have shape " + shape_str(out_shape(x, weight)));
  cpu::check_writable("linear", "out", out);
  cpu::check_no_overlap("linear", "out", out, "x", x);
  cpu::check_no_overlap("linear", "out", out, "weight", weight);
  run_linear(x, weight, bias, out);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_gpu_f32("matmul", "a", a, a);
  check_gpu_f32("matmul", "b", b, a);
  if (a.dim() != 2 || b.dim() != 2 || a.size(1) != b.size(0))
    cpu::fail("matmul", format_message("{} and {} do not chain: need [M, K] · [K, N]", cpu::describe("a", a),
                                    cpu::describe("b", b)));
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  Tensor out = Tensor::zeros({M, N}, DType::F32, a.device());
  if (M == 0 || N == 0 || K == 0) return out;
  set_device(a);
  const float one = 1.0f, zero = 0.0f;
  // Row-major c = a·b is column-major cᵀ = bᵀ·aᵀ.
  check_blas(cublasSgemm(blas_handle(a.device().index), CUBLAS_OP_N, CUBLAS_OP_N, int(N), int(M), int(K), &one,
                         b.data<float>(), int(N), a.data<float>(), int(K), &zero, out.data<float>(), int(N)),
             "cublasSgemm");
  return out;
}

}  // namespace ferry::ops::cuda
