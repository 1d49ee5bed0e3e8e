// Embedding lookup on cpu (see gather.h): every id is validated before any row is copied, then rows of any float
// dtype are converted to f32 with the ISA's converter (quantized rows dequantized), in parallel when there are many.
#include <fmt/format.h>

#include "check.h"
#include "ops/cuda_ops.h"
#include "ferry/core/cpu_features.h"
#include "ferry/core/quant.h"
#include "ferry/core/thread_pool.h"
#include "ferry/ops/gather.h"
#include "to_f32.h"

namespace ferry::ops {

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  if constexpr (cuda::kBuilt) {
    if (cuda::on_gpu(weight)) return cuda::embedding(weight, ids);
  }
  if (!is_quantized(weight.dtype())) cpu::check_float("embedding", "weight", weight);
  if (weight.dim() != 2) cpu::fail("embedding", cpu::describe("weight", weight) + " must be [vocab, dim]");
  cpu::check_host("embedding", "ids", ids);
  cpu::check_same_device("embedding", "weight", weight, "ids", ids);
  if (ids.dtype() != DType::I64 && ids.dtype() != DType::I32)
    cpu::fail("embedding", cpu::describe("ids", ids) + " must be i64 (or i32) token ids");
  const int64_t V = weight.size(0), D = weight.size(1), n = ids.numel();
  std::vector<int64_t> rows(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids.dtype() == DType::I64 ? ids.data<int64_t>()[i] : ids.data<int32_t>()[i];
    if (id < 0 || id >= V)
      cpu::fail("embedding",
                fmt::format("token id {} (at index {} of {}) is outside the vocabulary [0, {})", id, i,
                            cpu::describe("ids", ids), V),
                "does the tokenizer belong to this model? check vocab_size in config.json");
    rows[static_cast<std::size_t>(i)] = id;
  }
  Shape shape = ids.shape();
  shape.push_back(D);
  Tensor out = Tensor::empty(shape, DType::F32, weight.device());
  if (n == 0 || D == 0) return out;
#if FERRY_X86_KERNELS
  const auto to_f32 = cpu_isa() >= Isa::AVX2 ? cpu::to_f32_avx2 : cpu::to_f32_scalar;
#else
  const auto to_f32 = cpu::to_f32_scalar;
#endif
  const DType wt = weight.dtype();
  const std::size_t row_bytes = dtype_nbytes(wt, D);
  const auto* wp = static_cast<const char*>(weight.raw_data());
  float* op = out.data<float>();
  const auto ggml = is_quantized(wt) ? ggml_type_of(wt) : std::nullopt;
  parallel_for(0, n, std::max<int64_t>(1, 16384 / D), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const char* row = wp + static_cast<std::size_t>(rows[i]) * row_bytes;
      if (ggml) dequantize(*ggml, row, op + i * D, D);  // quantized rows: dequantized exactly as ggml does
      else to_f32(wt, row, op + i * D, D);
    }
  });
  return out;
}

}  // namespace ferry::ops
