// The quantized GEMM (prefill on quantized weights, ops/cpu/quant_gemm*.cc) against the GEMV served in tiles of
// activation rows that prefill uses below quant_gemm_min_rows, on a TinyLlama-sized matrix (N = 2048 outputs,
// K = 2048 inputs, random levels) for M activation rows, with each ISA's kernels (avx512: VNNI; avx2: the
// vpmaddubsw ones, which AVX2-only CPUs run). The GEMM runs at every M here, also below the crossover, which is what
// these figures decide. Counters: GOPs (the GEMM's 2·M·N·K / s, mean over passes), tiles_GOPs (the same for the
// tiles) and vs_tiles (the tiles' mean time ÷ the GEMM's, measured in alternating passes of one run; > 1 means the
// GEMM wins). Both include quantizing the activations.
//   build/bench/bench_quant_gemm --benchmark_filter='q4_k/avx2' --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "ferry/core/cpu_features.h"
#include "ferry/core/tensor.h"
#include "ferry/core/thread_pool.h"
#include "ops/cpu/linear_kernels.h"
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

// The GEMM as ops::linear runs it (quantize the activations as quant_gemv does, then quant_gemm), at any M.
void gemm(Isa isa, DType dtype, const void* w, int64_t N, int64_t K, int64_t M, const float* x, float* y,
          std::vector<uint8_t>& xq) {
  const auto& kern = ops::cpu::quant_kernels(isa);
  const bool kb = ops::cpu::uses_kblocks(dtype);
  const std::size_t row_size = kb ? K / 256 * sizeof(ops::cpu::QBlockK) : K / 32 * sizeof(ops::cpu::QBlock8);
  xq.resize(row_size * M);
  parallel_for(0, M, std::max<int64_t>(1, 4096 / K), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      uint8_t* dst = xq.data() + m * row_size;
      if (kb) kern.quantize_x_k(x + m * K, K, reinterpret_cast<ops::cpu::QBlockK*>(dst));
      else kern.quantize_x(x + m * K, K, reinterpret_cast<ops::cpu::QBlock8*>(dst));
    }
  });
  ops::cpu::quant_gemm(isa, dtype, w, N, K, M, xq.data(), row_size, nullptr, y);
}

void BM_QuantPrefill(benchmark::State& state, DType dtype, Isa isa) {
  const int64_t M = state.range(0), N = 2048, K = 2048;
  if (!cpu_supports(isa)) return state.SkipWithError("the CPU lacks this ISA");
  const Tensor w = random_f32({N, K}, 1).to(dtype), x = random_f32({M, K}, 2);
  std::vector<float> y(static_cast<std::size_t>(M * N));
  std::vector<uint8_t> xq;
  auto run = [&](bool use_gemm) {
    const auto t0 = Clock::now();
    if (use_gemm) gemm(isa, dtype, w.raw_data(), N, K, M, x.data<float>(), y.data(), xq);
    else ops::cpu::quant_gemv(isa, dtype, w.raw_data(), N, K, M, x.data<float>(), nullptr, y.data(), false);
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
  state.counters["tiles_GOPs"] = ops / t_tiles;
  state.counters["vs_tiles"] = t_tiles / t_gemm;
}

// The alternative an AMX CPU offers for prefill on quantized weights: dequantize them to bf16 (here the whole matrix,
// Tensor::to, timed separately as `dequant_ms`) and run the bf16 AMX GEMM (ops::linear's amx_linear, x rounded to
// bf16); GOPs counts the GEMM alone, vs_int8 is the AMX int8 GEMM's time ÷ (dequantization + bf16 GEMM).
//   build/bench/bench_quant_gemm --benchmark_filter=ViaBf16
void BM_QuantPrefillViaBf16(benchmark::State& state, DType dtype) {
  const int64_t M = state.range(0), N = 2048, K = 2048;
  if (!cpu_supports(Isa::AMX)) return state.SkipWithError("the CPU lacks AMX");
  const Tensor w = random_f32({N, K}, 1).to(dtype), x = random_f32({M, K}, 2);
  std::vector<float> y(static_cast<std::size_t>(M * N));
  std::vector<uint8_t> xq;
  double t_deq = 0, t_gemm = 0, t_int8 = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    const Tensor wb = w.to(DType::BF16);
    const double deq = seconds_since(t0);
    t0 = Clock::now();
    ops::cpu::amx_linear(wb.raw_data(), N, K, M, x.data<float>(), nullptr, y.data());
    const double g = seconds_since(t0);
    state.SetIterationTime(deq + g);
    t_deq += deq, t_gemm += g;
    t0 = Clock::now();
    gemm(Isa::AMX, dtype, w.raw_data(), N, K, M, x.data<float>(), y.data(), xq);
    t_int8 += seconds_since(t0);
  }
  const double n = double(state.iterations());
  state.counters["GOPs"] = 2.0 * double(M) * double(N) * double(K) / 1e9 * n / t_gemm;
  state.counters["dequant_ms"] = t_deq / n * 1e3;
  state.counters["vs_int8"] = t_int8 / (t_deq + t_gemm);
}
#define FERRY_QUANT_PREFILL_VIA_BF16(name, dt)        \
  BENCHMARK_CAPTURE(BM_QuantPrefillViaBf16, name, dt) \
      ->ArgName("M")                                  \
      ->Arg(64)                                       \
      ->Arg(512)                                      \
      ->UseManualTime()                               \
      ->Unit(benchmark::kMillisecond)
FERRY_QUANT_PREFILL_VIA_BF16(q8_0, DType::Q8_0);
FERRY_QUANT_PREFILL_VIA_BF16(q4_k, DType::Q4_K);

// M: around the crossovers (quant_gemm_min_rows: 16 / 32 / 48 / 64 by ISA and type) and a long prefill.
#define FERRY_QUANT_PREFILL(name, dt, isa)                                                                  \
  BENCHMARK_CAPTURE(BM_QuantPrefill, name, dt, isa)->ArgName("M")->Arg(8)->Arg(12)->Arg(16)->Arg(32)->Arg(48)->Arg(64) \
      ->Arg(512)->UseManualTime()->Unit(benchmark::kMillisecond)
#define FERRY_QUANT_PREFILL_ISAS(name, dt)             \
  FERRY_QUANT_PREFILL(name / amx, dt, Isa::AMX);       \
  FERRY_QUANT_PREFILL(name / avx512, dt, Isa::AVX512); \
  FERRY_QUANT_PREFILL(name / avx2, dt, Isa::AVX2)
FERRY_QUANT_PREFILL_ISAS(q8_0, DType::Q8_0);
FERRY_QUANT_PREFILL_ISAS(q4_0, DType::Q4_0);
FERRY_QUANT_PREFILL_ISAS(q4_1, DType::Q4_1);
FERRY_QUANT_PREFILL_ISAS(q5_0, DType::Q5_0);
FERRY_QUANT_PREFILL_ISAS(q5_1, DType::Q5_1);
FERRY_QUANT_PREFILL_ISAS(q4_k, DType::Q4_K);
FERRY_QUANT_PREFILL_ISAS(q5_k, DType::Q5_K);
FERRY_QUANT_PREFILL_ISAS(q6_k, DType::Q6_K);

}  // namespace

BENCHMARK_MAIN();
