// The quantized GEMM (prefill on quantized weights, ops/cpu/quant_gemm*.cc) against the GEMV served in tiles of
// activation rows that prefill used before it, on a TinyLlama-sized matrix (N = 2048 outputs, K = 2048 inputs,
// random levels) for M activation rows. Counters: GOPs (2·M·N·K / s, mean over passes) and vs_tiles (the GEMM's
// mean time ÷ the tiles' for the same M, measured in alternating passes of one run; > 1 means the GEMM wins).
//   build/bench/bench_quant_gemm --benchmark_filter='q4_k' --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include "ferry/core/cpu_features.h"
#include "ferry/core/tensor.h"
#include "ops/cpu/quant_kernels.h"

namespace {

using namespace ferry;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Tensor random_f32(Shape shape, uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) s ^= s << 13, s ^= s >> 17, s ^= s << 5, x = static_cast<float>(s % 20001) / 10000.0f - 1.0f;
  return Tensor::from_vector(v, std::move(shape));
}

void BM_QuantPrefill(benchmark::State& state, DType dtype) {
  const int64_t M = state.range(0), N = 2048, K = 2048;
  if (!cpu_supports(Isa::AVX512)) return state.SkipWithError("the quantized GEMM needs AVX-512 VNNI");
  const Tensor w = random_f32({N, K}, 1).to(dtype), x = random_f32({M, K}, 2);
  std::vector<float> y(static_cast<std::size_t>(M * N));
  auto run = [&](bool gemm) {
    const auto t0 = Clock::now();
    ops::cpu::quant_gemv(Isa::AVX512, dtype, w.raw_data(), N, K, M, x.data<float>(), nullptr, y.data(), gemm);
    return seconds_since(t0);
  };
  run(true), run(false);
  double t_gemm = 0, t_tiles = 0;
  for (auto _ : state) {
    const double t = run(true);
    state.SetIterationTime(t);
    t_gemm += t;
    t_tiles += run(false);
  }
  const double ops = 2.0 * double(M) * double(N) * double(K) / 1e9 * double(state.iterations());
  state.counters["GOPs"] = ops / t_gemm;
  state.counters["vs_tiles"] = t_tiles / t_gemm;
}

#define FERRY_QUANT_PREFILL(name, dt)                                                                        \
  BENCHMARK_CAPTURE(BM_QuantPrefill, name, dt)->ArgName("M")->Arg(8)->Arg(16)->Arg(32)->Arg(64)->Arg(512) \
      ->UseManualTime()->Unit(benchmark::kMillisecond)
FERRY_QUANT_PREFILL(q8_0, DType::Q8_0);
FERRY_QUANT_PREFILL(q4_0, DType::Q4_0);
FERRY_QUANT_PREFILL(q4_1, DType::Q4_1);
FERRY_QUANT_PREFILL(q5_0, DType::Q5_0);
FERRY_QUANT_PREFILL(q5_1, DType::Q5_1);
FERRY_QUANT_PREFILL(q4_k, DType::Q4_K);
FERRY_QUANT_PREFILL(q5_k, DType::Q5_K);
FERRY_QUANT_PREFILL(q6_k, DType::Q6_K);

}  // namespace

BENCHMARK_MAIN();
