// argmax and top-k over f32 logits on cpu (see gather.h), and the scalar argmax row kernel. NaN ranks above every
// number (as in torch.argmax and torch.topk), and among equal values the lower index wins. top-k is scalar
// (a partial sort of indices): sampling calls it once per token on one row.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "check.h"
#include "ops/cuda_ops.h"
#include "ferry/core/cpu_features.h"
#include "select_kernels.h"
#include "ferry/core/thread_pool.h"
#include "ferry/ops/gather.h"

namespace ferry::ops {
namespace {

// a ranks strictly above b.
inline bool above(float a, float b) { return std::isnan(a) ? !std::isnan(b) : a > b; }

}  // namespace

namespace cpu::scalar {

int64_t argmax_row(const float* x, int64_t V) {
  int64_t best = 0;
  for (int64_t i = 1; i < V; ++i)
    if (above(x[i], x[best])) best = i;
  return best;
}

}  // namespace cpu::scalar

Tensor argmax(const Tensor& x) {
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(x)) return cuda::argmax(x);
  }
  cpu::check_f32("argmax", "x", x);
  cpu::check_min_dim("argmax", "x", x, 1);
  const int64_t V = x.size(-1);
  if (V == 0) cpu::fail("argmax", cpu::describe("x", x) + " has an empty last dimension");
  Tensor out = Tensor::empty(Shape(x.shape().begin(), x.shape().end() - 1), DType::I64, x.device());
  const int64_t rows = x.numel() / V;
  const float* xp = x.data<float>();
  int64_t* op = out.data<int64_t>();
#if FERRY_X86_KERNELS
  const auto kernel = cpu_isa() >= Isa::AVX2 ? cpu::avx2::argmax_row : cpu::scalar::argmax_row;
#else
  const auto kernel = cpu::scalar::argmax_row;
#endif
  parallel_for(0, rows, std::max<int64_t>(1, 65536 / V), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) op[r] = kernel(xp + r * V, V);
  });
  return out;
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k) {
  // Sampling asks for the top k of one row of logits: a GPU's row comes to the host, the answer goes back.
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(x)) {
      auto [values, indices] = topk(x.to(Device::cpu()), k);
      return {values.to(x.device()), indices.to(x.device())};
    }
  }
  cpu::check_f32("topk", "x", x);
  if (x.dim() != 1) cpu::fail("topk", cpu::describe("x", x) + " must be 1-D [V]");
  const int64_t V = x.size(0);
  if (k < 0 || k > V) cpu::fail("topk", fmt::format("k = {} is outside [0, {}] for {}", k, V, cpu::describe("x", x)));
  const float* xp = x.data<float>();
  std::vector<int64_t> idx(static_cast<std::size_t>(V));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [xp](int64_t a, int64_t b) {
    return above(xp[a], xp[b]) || (!above(xp[b], xp[a]) && a < b);
  });
  Tensor values = Tensor::empty({k}, DType::F32, x.device());
  Tensor indices = Tensor::empty({k}, DType::I64, x.device());
  for (int64_t i = 0; i < k; ++i) {
    values.data<float>()[i] = xp[idx[i]];
    indices.data<int64_t>()[i] = idx[i];
  }
  return {values, indices};
}

}  // namespace ferry::ops
