// Binary elementwise ops on cpu (add, mul and their in-place forms, scale), the trailing-shape broadcast of
// elementwise.h, the scalar kernels, and the per-ISA kernel table of every elementwise op.
//
// Broadcast: b's shape equals the trailing dims of a's, so a is `outer` repetitions of b's `inner` elements.
// When b is short (a bias of 7, a scalar), it is first repeated into a run of ≥ 1024 elements, so the kernels
// always see long contiguous runs instead of one call per row.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "check.h"
#include "ops/cuda_ops.h"
#include "elementwise_kernels.h"
#include "ferry/core/thread_pool.h"
#include "ferry/ops/elementwise.h"

namespace ferry::ops {
namespace cpu {
namespace scalar {

void add(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}
void mul(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}
void scale(const float* x, float s, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}

}  // namespace scalar

const ElementwiseKernels& elementwise_kernels(Isa isa) {
  static const ElementwiseKernels s{scalar::add,       scalar::mul,  scalar::scale,   scalar::silu, scalar::gelu,
                                    scalar::gelu_tanh, scalar::relu, scalar::silu_mul};
#if FERRY_X86_KERNELS
  static const ElementwiseKernels v{avx2::add,       avx2::mul,  avx2::scale,   avx2::silu, avx2::gelu,
                                    avx2::gelu_tanh, avx2::relu, avx2::silu_mul};
  if (isa >= Isa::AVX2) return v;
#endif
  (void)isa;
  return s;
}

void parallel_elements(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  parallel_for(0, n, grain, fn);
}

}  // namespace cpu

namespace {

using BinaryKernel = void (*)(const float*, const float*, float*, int64_t);

// Dtypes and the broadcast, on any device: checked before the device decides whose kernel runs (cpu or cuda).
void check_broadcast_shapes(const char* op, const Tensor& a, const Tensor& b) {
  for (auto [name, t] : {std::pair{"a", &a}, std::pair{"b", &b}}) {
    if (!t->defined()) cpu::fail(op, fmt::format("{} is undefined", name));
    if (t->dtype() != DType::F32)
      cpu::fail(op, fmt::format("{} must be f32", cpu::describe(name, *t)), "convert it with .to(DType::F32)");
  }
  const auto& as = a.shape();
  const auto& bs = b.shape();
  if (bs.size() > as.size() || !std::equal(bs.begin(), bs.end(), as.end() - static_cast<std::ptrdiff_t>(bs.size())))
    cpu::fail(op,
              fmt::format("{} does not broadcast over {}", cpu::describe("b", b), cpu::describe("a", a)),
              "b's shape must equal the trailing dimensions of a's (e.g. a bias [N] over [T, N])");
}

// Both in host memory on one device (after check_broadcast_shapes); returns b's element count (the broadcast period).
int64_t check_broadcast(const char* op, const Tensor& a, const Tensor& b) {
  cpu::check_f32(op, "a", a);
  cpu::check_f32(op, "b", b);
  cpu::check_same_device(op, "a", a, "b", b);
  return b.numel();
}

// y = a ⊙ b with b repeated over a (y may be a).
void broadcast_binary(const Tensor& a, const Tensor& b, const Tensor& y, BinaryKernel kernel) {
  const int64_t n = a.numel(), inner = b.numel();
  if (n == 0) return;
  const float *ap = a.data<float>(), *bp = b.data<float>();
  float* yp = y.data<float>();
  std::vector<float> repeated;
  int64_t period = inner;
  if (inner < n && inner < 1024) {
    const int64_t reps = (1024 + inner - 1) / inner;
    repeated.resize(static_cast<std::size_t>(reps * inner));
    for (int64_t r = 0; r < reps; ++r) std::copy(bp, bp + inner, repeated.begin() + r * inner);
    bp = repeated.data();
    period = reps * inner;
  }
  const int64_t runs = (n + period - 1) / period;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / period);
  parallel_for(0, runs, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i0 = r * period, len = std::min(period, n - i0);
      kernel(ap + i0, bp, yp + i0, len);
    }
  });
}

// a + b, or a ⊙ b with `multiply`: on a's GPU when it lives on one, else with the cpu kernels of this ISA.
Tensor binary(const char* op, const Tensor& a, const Tensor& b, bool multiply) {
  check_broadcast_shapes(op, a, b);
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(a)) return cuda::binary(op, a, b, multiply);
  }
  check_broadcast(op, a, b);
  const auto& kernels = cpu::elementwise_kernels(cpu_isa());
  Tensor y = Tensor::empty(a.shape(), DType::F32, a.device());
  broadcast_binary(a, b, y, multiply ? kernels.mul : kernels.add);
  return y;
}

void binary_inplace(const char* op, Tensor& a, const Tensor& b, bool multiply) {
  check_broadcast_shapes(op, a, b);
  cpu::check_writable(op, "a", a);
  // b overlapping a is fine only when it is exactly a (element i read before written); a partial overlap would
  // read elements this op already wrote.
  if (!(b.shares_storage(a) && b.byte_offset() == a.byte_offset() && b.numel() == a.numel()))
    cpu::check_no_overlap(op, "a", a, "b", b);
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(a)) return cuda::binary_(op, a, b, multiply);
  }
  check_broadcast(op, a, b);
  const auto& kernels = cpu::elementwise_kernels(cpu_isa());
  broadcast_binary(a, b, a, multiply ? kernels.mul : kernels.add);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary("add", a, b, /*multiply=*/false); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary("mul", a, b, /*multiply=*/true); }
void add_(Tensor& a, const Tensor& b) { binary_inplace("add_", a, b, /*multiply=*/false); }
void mul_(Tensor& a, const Tensor& b) { binary_inplace("mul_", a, b, /*multiply=*/true); }

Tensor scale(const Tensor& x, float s) {
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(x)) return cuda::scale(x, s);
  }
  cpu::check_f32("scale", "x", x);
  const auto kernel = cpu::elementwise_kernels(cpu_isa()).scale;
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  cpu::parallel_elements(x.numel(), [&](int64_t i0, int64_t i1) { kernel(xp + i0, s, yp + i0, i1 - i0); });
  return y;
}

}  // namespace ferry::ops
