// Linear-algebra benchmarks for the cpu ops, each judged against a baseline measured in the same run:
//   ReadBandwidth/<streams>  reading a 512 MiB buffer (far larger than the 32 MiB L3) with the thread pool, as a
//                            GEMV reads its weights: rows of 8 KiB, 1, 2, 4 or 8 rows in flight per thread.
//                            The baseline is the best of all patterns (measured once at start-up, printed in the
//                            context as read_bandwidth_baseline_GBps).
//   Gemv/<dtype>/<N>x<K>     one token through a weight matrix; the weights rotate over enough copies (≥ 256 MiB)
//                            that every call streams from DRAM, as a real decode step does. Counters: GBps
//                            (weight bytes / time) and bw_fraction (GBps / baseline; target ≥ 0.8).
//   Gemm/<path>/512x4096x4096  prefill: 512 tokens × a 4096 × 4096 weight. Counters: GFLOPs and vs_openblas
//                            (GFLOP/s / OpenBLAS sgemm f32 on the same shape, measured at start-up).
// Run: build-*/bench/bench_ops --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "ferry/core/convert.h"
#include "ferry/core/cpu_features.h"
#include "ferry/core/tensor.h"
#include "ferry/core/thread_pool.h"
#include "ferry/ops/linear.h"
#include "ops/cpu/linear_kernels.h"

namespace {

using namespace ferry;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kBufferBytes = std::size_t(512) << 20;
constexpr std::size_t kRowBytes = 8192;  // one row of a 4096-wide f16 weight

const char* buffer() {
  static char* buf = [] {
    auto* p = static_cast<char*>(std::aligned_alloc(4096, kBufferBytes));
    std::memset(p, 1, kBufferBytes);  // touch every page so no fault lands in a timed pass
    return p;
  }();
  return buf;
}

// Reads `streams` rows at once, 64 bytes from each in turn, summing so the loads cannot be dropped.
__attribute__((target("avx2"))) uint64_t read_rows(const char* base, int64_t r0, int64_t r1, int streams) {
  __m256i acc = _mm256_setzero_si256();
  for (int64_t r = r0; r < r1; r += streams) {
    const int s_here = static_cast<int>(std::min<int64_t>(streams, r1 - r));
    for (std::size_t off = 0; off < kRowBytes; off += 64)
      for (int s = 0; s < s_here; ++s) {
        const char* p = base + static_cast<std::size_t>(r + s) * kRowBytes + off;
        acc = _mm256_add_epi64(acc, _mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
        acc = _mm256_add_epi64(acc, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32)));
      }
  }
  return static_cast<uint64_t>(_mm256_extract_epi64(acc, 0) + _mm256_extract_epi64(acc, 3));
}

// One pass over the whole buffer with the thread pool; returns seconds.
double read_pass(int streams) {
  const int64_t rows = kBufferBytes / kRowBytes;
  auto t0 = Clock::now();
  parallel_for(0, rows, 64, [&](int64_t r0, int64_t r1) {
    uint64_t sum = read_rows(buffer(), r0, r1, streams);
    benchmark::DoNotOptimize(sum);
  });
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

const int kStreamCounts[] = {1, 2, 4, 8};

// The baseline: the fastest pass of any pattern, in GB/s (1e9 bytes).
double baseline_gbps() {
  static const double gbps = [] {
    double best = 0;
    read_pass(1);  // warm up the pool and the page tables
    for (int rep = 0; rep < 5; ++rep)
      for (int s : kStreamCounts) best = std::max(best, kBufferBytes / read_pass(s) / 1e9);
    return best;
  }();
  return gbps;
}

// GB/s and the fraction of the baseline, from the bytes read and the seconds the timed loop took.
void report_bandwidth(benchmark::State& state, double bytes, double seconds) {
  const double gbps = bytes / seconds / 1e9;
  state.counters["GBps"] = gbps;
  state.counters["bw_fraction"] = gbps / baseline_gbps();
}

void BM_ReadBandwidth(benchmark::State& state) {
  const int streams = static_cast<int>(state.range(0));
  double seconds = 0;
  for (auto _ : state) {
    const double t = read_pass(streams);
    state.SetIterationTime(t);
    seconds += t;
  }
  report_bandwidth(state, double(kBufferBytes) * double(state.iterations()), seconds);
}
BENCHMARK(BM_ReadBandwidth)->ArgName("streams_per_thread")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// ---- GEMV -----------------------------------------------------------------------------------------------------

Tensor random_weight(int64_t N, int64_t K, DType dtype, uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(N * K));
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) s = s * 1664525u + 1013904223u, x = static_cast<float>(s >> 8) / 16777216.0f - 0.5f;
  return Tensor::from_vector(v, {N, K}, dtype);
}

void BM_Gemv(benchmark::State& state, DType dtype) {
  const int64_t N = state.range(0), K = state.range(1);
  const std::size_t bytes = static_cast<std::size_t>(N * K) * dtype_size(dtype);
  const std::size_t copies = std::max<std::size_t>(2, ((std::size_t(256) << 20) + bytes - 1) / bytes);
  std::vector<Tensor> weights;
  for (std::size_t i = 0; i < copies; ++i) weights.push_back(random_weight(N, K, dtype, static_cast<uint32_t>(i)));
  Tensor x = random_weight(1, K, DType::F32, 99).reshape({K});
  Tensor y = Tensor::empty({N}, DType::F32);
  std::size_t i = 0;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    ops::linear_into(x, weights[i], {}, y);
    i = (i + 1) % copies;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  benchmark::DoNotOptimize(y.data<float>());
  report_bandwidth(state, double(bytes) * double(state.iterations()), seconds);
}
BENCHMARK_CAPTURE(BM_Gemv, f16, DType::F16)->Args({4096, 4096})->Args({11008, 4096})->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Gemv, bf16, DType::BF16)->Args({4096, 4096})->Args({11008, 4096})->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Gemv, f8_e4m3fn, DType::F8_E4M3FN)->Args({4096, 4096})->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Gemv, f32, DType::F32)->Args({4096, 4096})->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- GEMM (prefill) -------------------------------------------------------------------------------------------

constexpr int64_t kM = 512, kN = 4096, kK = 4096;
constexpr double kFlops = 2.0 * kM * kN * kK;

struct GemmData {
  Tensor x = random_weight(kM, kK, DType::F32, 7);
  Tensor w32 = random_weight(kN, kK, DType::F32, 8);
  Tensor y = Tensor::empty({kM, kN}, DType::F32);
};
GemmData& gemm_data() {
  static GemmData d;
  return d;
}

double time_blas() {
  auto& d = gemm_data();
  auto t0 = Clock::now();
  ops::cpu::blas_sgemm(kM, kN, kK, d.x.data<float>(), d.w32.data<float>(), true, nullptr, d.y.data<float>());
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// OpenBLAS sgemm GFLOP/s on the prefill shape: best of 5 after a warm-up (0 without BLAS).
double openblas_gflops() {
  static const double g = [] {
    if (!ops::cpu::have_blas()) return 0.0;
    double best = 1e30;
    time_blas();
    for (int i = 0; i < 5; ++i) best = std::min(best, time_blas());
    return kFlops / best / 1e9;
  }();
  return g;
}

void report_gemm(benchmark::State& state, double seconds) {
  const double gflops = kFlops * double(state.iterations()) / seconds / 1e9;
  state.counters["GFLOPs"] = gflops;
  if (openblas_gflops() > 0) state.counters["vs_openblas"] = gflops / openblas_gflops();
}

void BM_GemmOpenBlasF32(benchmark::State& state) {
  if (!ops::cpu::have_blas()) return state.SkipWithError("ferry_ops was built without OpenBLAS");
  double seconds = 0;
  for (auto _ : state) {
    const double t = time_blas();
    state.SetIterationTime(t);
    seconds += t;
  }
  report_gemm(state, seconds);
}
BENCHMARK(BM_GemmOpenBlasF32)->Name("Gemm/openblas_sgemm_f32/512x4096x4096")->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// ferry's own blocked GEMM (never BLAS), for each weight dtype.
void BM_GemmFerry(benchmark::State& state, DType dtype) {
  auto& d = gemm_data();
  Tensor w = d.w32.to(dtype);
  const auto t0 = Clock::now();
  for (auto _ : state)
    ops::cpu::gemm(cpu_isa(), kM, kN, kK, d.x.data<float>(), ops::cpu::GemmRhs{dtype, w.raw_data(), true}, nullptr,
                   d.y.data<float>());
  report_gemm(state, std::chrono::duration<double>(Clock::now() - t0).count());
}
BENCHMARK_CAPTURE(BM_GemmFerry, f32, DType::F32)->Name("Gemm/ferry_f32/512x4096x4096")->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GemmFerry, bf16, DType::BF16)->Name("Gemm/ferry_bf16/512x4096x4096")->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GemmFerry, f16, DType::F16)->Name("Gemm/ferry_f16/512x4096x4096")->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GemmFerry, f8_e4m3fn, DType::F8_E4M3FN)->Name("Gemm/ferry_f8_e4m3fn/512x4096x4096")
    ->UseRealTime()->Unit(benchmark::kMillisecond);

// ops::linear as the library runs it (f32 weights: OpenBLAS when linked).
void BM_LinearF32(benchmark::State& state) {
  auto& d = gemm_data();
  const auto t0 = Clock::now();
  for (auto _ : state) ops::linear_into(d.x, d.w32, {}, d.y);
  report_gemm(state, std::chrono::duration<double>(Clock::now() - t0).count());
}
BENCHMARK(BM_LinearF32)->Name("Gemm/ops_linear_f32/512x4096x4096")->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("ferry_isa", std::string(isa_name(cpu_isa())));
  benchmark::AddCustomContext("ferry_threads", std::to_string(num_threads()));
  benchmark::AddCustomContext("read_bandwidth_baseline_GBps", std::to_string(baseline_gbps()));
  if (ops::cpu::have_blas())
    benchmark::AddCustomContext("openblas_sgemm_512x4096x4096_GFLOPs", std::to_string(openblas_gflops()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
