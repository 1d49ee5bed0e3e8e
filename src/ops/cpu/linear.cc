// ops::linear and ops::matmul on cpu: argument checks, then the choice of path (see linear_kernels.h):
//   quantized weights      -> the quantized kernels (quant_kernels.h), integer dot products on 8-bit activations;
//   one row of activations -> GEMV, every float weight dtype;
//   2 .. small_batch_max_rows rows, f32 / f16 / bf16 weights (batched decode)
//                          -> the small-batch kernel: each weight row read once, dotted in registers with every row
//                             (AVX-512: up to 64 rows for f16 / bf16, 32 for f32; AVX2 and scalar: 16; the measured
//                             crossovers with the GEMM, docs/benchmarks.md "Small-batch linear");
//   several rows otherwise -> the blocked GEMM, converting weight blocks as it goes.
// bf16 weights on AVX-512 BF16 CPUs: x rounded to bf16 and bf16 pairs multiplied by vdpbf16ps (avx512bf16 kernels);
// one row: the GEMV, any more: the small-batch kernel, whatever M (no GEMM), the two computing each output with the
// same instructions, so a row's result does not depend on the rows that share its call (batch invariance,
// linear_kernels.h; FERRY_ISA=avx2: the f32 paths, x not rounded).
// bf16 weights on AMX CPUs (ISA AMX): the AMX tiles for every M, x rounded to bf16 likewise (amx_linear.cc,
// linear_kernels.h "AMX"); FERRY_ISA=avx512 for the AVX-512 BF16 kernels above.
// OpenBLAS sgemm is not used for f32 weights: on the 2-core dev VM the blocked GEMM matched it at 512 × 4096 ×
// 4096 (within noise, both ~50 GFLOP/s best-of-12 on 2 threads; OpenBLAS ~3% ahead on one idle core) and beat
// it for few rows (64 rows: 41 vs 26 GFLOP/s), and OpenBLAS would bring a second spinning thread pool that
// competes with ferry's. bench/bench_ops.cc keeps measuring it (Gemm/openblas_sgemm_f32) to revisit this.
// The ISA is read once here and passed down.
#include <fmt/format.h>

#include "check.h"
#include "ops/cuda_ops.h"
#include "ferry/core/cpu_features.h"
#include "ferry/ops/linear.h"
#include "linear_kernels.h"
#include "quant_kernels.h"

namespace ferry::ops {
namespace cpu {

const LinearKernels& linear_kernels(Isa isa) {
  static const LinearKernels scalar_kernels{scalar::gemv, scalar::micro, scalar::pack_panel, scalar::small_batch, 0};
#if FERRY_X86_KERNELS
  static const LinearKernels avx2_kernels{avx2::gemv, avx2::micro, avx2::pack_panel, avx2::small_batch,
                                          avx2::kSmallBatchX};
  static const LinearKernels avx512_kernels{avx2::gemv, avx2::micro, avx2::pack_panel, avx512::small_batch,
                                            avx512::kSmallBatchX};
  if (isa >= Isa::AVX2) return isa >= Isa::AVX512 ? avx512_kernels : avx2_kernels;
#endif
  (void)isa;
  return scalar_kernels;
}

}  // namespace cpu

namespace {

bool is_linear_weight_dtype(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F8_E4M3FN || t == DType::F8_E5M2 ||
         is_quantized(t);
}

// Shapes and dtypes: checked before the tensors' device decides whose kernel runs (cpu or cuda).
void check_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!x.defined()) cpu::fail("linear", "x is undefined");
  if (!weight.defined()) cpu::fail("linear", "weight is undefined");
  if (x.dtype() != DType::F32) cpu::fail("linear", cpu::describe("x", x) + " must be f32", "convert it with .to(DType::F32)");
  cpu::check_min_dim("linear", "x", x, 1);
  if (weight.dim() != 2) cpu::fail("linear", cpu::describe("weight", weight) + " must be 2-D [out_features, in_features]");
  if (!is_linear_weight_dtype(weight.dtype()))
    cpu::fail("linear", cpu::describe("weight", weight) + " has an unsupported dtype",
              "linear weights may be f32, f16, bf16, f8_e4m3fn, f8_e5m2 or a quantized type (q8_0 ... q6_k)");
  if (x.size(-1) != weight.size(1))
    cpu::fail("linear",
              fmt::format("{} and {}: in_features differ ({} vs {})", cpu::describe("x", x),
                          cpu::describe("weight", weight), x.size(-1), weight.size(1)),
              "x's last dimension must equal weight's second");
  if (is_quantized(weight.dtype()) && weight.device().is_cuda())
    cpu::fail("linear", cpu::describe("weight", weight) + ": quantized weights run on the CPU only",
              "place quantized layers on cpu (device_map), or load the model unquantized for the GPU");
  if (bias.defined() && (bias.numel() != weight.size(0) || !is_floating_point(bias.dtype())))
    cpu::fail("linear", cpu::describe("bias", bias) + " must be a float vector of out_features (" +
                            std::to_string(weight.size(0)) + ") elements");
}

void check_host_weight(const Tensor& x, const Tensor& weight) {
  cpu::check_host("linear", "x", x);
  cpu::check_host("linear", "weight", weight);
  cpu::check_same_device("linear", "x", x, "weight", weight);
}

Shape linear_out_shape(const Tensor& x, const Tensor& weight) {
  Shape s = x.shape();
  s.back() = weight.size(0);
  return s;
}

void run_linear(const Tensor& x, const Tensor& weight, const Tensor& bias_f32, const Tensor& out) {
  const int64_t K = weight.size(1), N = weight.size(0);
  const int64_t rows = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));  // 1 for a 1-D x
  if (rows == 0 || N == 0) return;
  const float* xp = x.data<float>();
  const float* bp = bias_f32.defined() ? bias_f32.data<float>() : nullptr;
  float* yp = out.data<float>();
  const Isa isa = cpu_isa();
  if (is_quantized(weight.dtype())) return cpu::quant_gemv(isa, weight.dtype(), weight.raw_data(), N, K, rows, xp, bp, yp);
  if (cpu::use_amx(isa, weight.dtype())) return cpu::amx_linear(weight.raw_data(), N, K, rows, xp, bp, yp);
  if (rows == 1) return cpu::gemv(isa, weight.dtype(), weight.raw_data(), N, K, xp, bp, yp);
  if (cpu::use_small_batch(isa, weight.dtype(), rows))
    return cpu::small_batch(isa, weight.dtype(), weight.raw_data(), N, K, rows, xp, bp, yp);
  cpu::gemm(isa, rows, N, K, xp, cpu::GemmRhs{weight.dtype(), weight.raw_data(), true}, bp, yp);
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_linear(x, weight, bias);
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(x)) return cuda::linear(x, weight, bias);
  }
  check_host_weight(x, weight);
  Tensor b = cpu::param_f32("linear", "bias", bias, weight.size(0), x);
  Tensor out = Tensor::empty(linear_out_shape(x, weight), DType::F32, x.device());
  run_linear(x, weight, b, out);
  return out;
}

void linear_into(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out) {
  check_linear(x, weight, bias);
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(x)) return cuda::linear_into(x, weight, bias, out);
  }
  check_host_weight(x, weight);
  Tensor b = cpu::param_f32("linear", "bias", bias, weight.size(0), x);
  cpu::check_out("linear", out, linear_out_shape(x, weight));
  cpu::check_same_device("linear", "x", x, "out", out);
  cpu::check_no_overlap("linear", "out", out, "x", x);
  cpu::check_no_overlap("linear", "out", out, "weight", weight);
  run_linear(x, weight, b, out);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(a)) return cuda::matmul(a, b);
  }
  cpu::check_f32("matmul", "a", a);
  cpu::check_f32("matmul", "b", b);
  cpu::check_same_device("matmul", "a", a, "b", b);
  if (a.dim() != 2 || b.dim() != 2 || a.size(1) != b.size(0))
    cpu::fail("matmul", fmt::format("{} and {} do not chain: need [M, K] · [K, N]", cpu::describe("a", a),
                                    cpu::describe("b", b)));
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  Tensor out = Tensor::empty({M, N}, DType::F32, a.device());
  if (M == 0 || N == 0) return out;
  cpu::gemm(cpu_isa(), M, N, K, a.data<float>(), cpu::GemmRhs{DType::F32, b.raw_data(), false}, nullptr, out.data<float>());
  return out;
}

}  // namespace ferry::ops
