// The non-GEMM kernels of a transformer step, at Llama-7B-like sizes, each against its own scalar path in the same
// run (counter `vs_scalar`: speed-up of the dispatched ISA over FERRY_ISA=scalar) and with a throughput counter:
//   RmsNorm, SiluMul, Softmax, Rotary, Embedding, Argmax: bytes touched per second (GBps);
//   Attention/decode (1 token over a 4096-key bf16 cache, 32 query / 8 kv heads, head_dim 128): cache GBps;
//   Attention/prefill (512 tokens, causal): GFLOPs (2·2·T·S/2·Hq·D).
// Run: build-*/bench/bench_ops_kernels --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ferry/core/cpu_features.h"
#include "ferry/core/tensor.h"
#include "ferry/ops.h"

namespace {

using namespace ferry;
using Clock = std::chrono::steady_clock;

Tensor random_tensor(Shape shape, DType dtype, uint64_t seed, float scale = 1.0f) {
  Tensor f = Tensor::empty(std::move(shape), DType::F32);
  auto* p = f.data<float>();
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
  for (int64_t i = 0; i < f.numel(); ++i)
    s ^= s << 13, s ^= s >> 7, s ^= s << 17, p[i] = (static_cast<float>(s >> 40) / 16777216.0f - 0.5f) * scale;
  return f.to(dtype);
}

// Seconds per call of fn with the scalar path forced: median of 5 (measured once per benchmark name).
double scalar_seconds(const std::string& name, const std::function<void()>& fn) {
  static std::map<std::string, double> cache;
  if (auto it = cache.find(name); it != cache.end()) return it->second;
  ScopedIsa scalar(Isa::Scalar);
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return cache[name] = t[2];
}

// Times fn with the dispatched ISA; reports `unit_name` = units / s and the speed-up over scalar.
void run(benchmark::State& state, const std::string& name, double units, const char* unit_name,
         const std::function<void()>& fn) {
  const double scalar = scalar_seconds(name, fn);
  double total = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    fn();
    total += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  const double per_call = total / double(state.iterations());
  state.counters[unit_name] = units / per_call;
  state.counters["vs_scalar"] = scalar / per_call;
}

void BM_RmsNorm(benchmark::State& state) {
  const int64_t T = state.range(0), D = 4096;
  Tensor x = random_tensor({T, D}, DType::F32, 1), w = random_tensor({D}, DType::BF16, 2);
  run(state, "rms" + std::to_string(T), 2.0 * T * D * 4 / 1e9, "GBps", [&] { benchmark::DoNotOptimize(ops::rms_norm(x, w, 1e-6f)); });
}
BENCHMARK(BM_RmsNorm)->Arg(1)->Arg(512)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_SiluMul(benchmark::State& state) {
  const int64_t T = state.range(0), F = 11008;
  Tensor g = random_tensor({T, F}, DType::F32, 3, 8), u = random_tensor({T, F}, DType::F32, 4);
  run(state, "silu_mul" + std::to_string(T), 3.0 * T * F * 4 / 1e9, "GBps", [&] { benchmark::DoNotOptimize(ops::silu_mul(g, u)); });
}
BENCHMARK(BM_SiluMul)->Arg(1)->Arg(512)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_Gelu(benchmark::State& state) {
  Tensor x = random_tensor({512, 4096}, DType::F32, 5, 8);
  run(state, "gelu", 2.0 * x.numel() * 4 / 1e9, "GBps", [&] { benchmark::DoNotOptimize(ops::gelu(x)); });
}
BENCHMARK(BM_Gelu)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_Softmax(benchmark::State& state) {
  Tensor x = random_tensor({32, 32000}, DType::F32, 6, 20);
  run(state, "softmax", 2.0 * x.numel() * 4 / 1e9, "GBps", [&] { benchmark::DoNotOptimize(ops::softmax(x)); });
}
BENCHMARK(BM_Softmax)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_Rotary(benchmark::State& state) {
  const int64_t T = state.range(0), H = 32, D = 128;
  Tensor x = random_tensor({T, H, D}, DType::F32, 7);
  std::vector<int64_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = 100 + t;
  Tensor p = Tensor::from_vector(pos, {T}), inv = ops::rope_inv_freq(D, 500000.0);
  run(state, "rotary" + std::to_string(T), 2.0 * x.nbytes() / 1e9, "GBps",
      [&] { ops::apply_rotary_(x, p, inv, ops::RopeLayout::RotateHalf); });
}
BENCHMARK(BM_Rotary)->Arg(1)->Arg(512)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_AttentionDecode(benchmark::State& state) {
  const int64_t S = 4096, Hq = 32, Hkv = 8, D = 128;
  Tensor q = random_tensor({1, Hq, D}, DType::F32, 8);
  Tensor k = random_tensor({S, Hkv, D}, DType::BF16, 9), v = random_tensor({S, Hkv, D}, DType::BF16, 10);
  run(state, "attn_decode", 2.0 * k.nbytes() / 1e9, "GBps",
      [&] { benchmark::DoNotOptimize(ops::attention(q, k, v, S - 1, 0.088f)); });
}
BENCHMARK(BM_AttentionDecode)->Name("Attention/decode")->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_AttentionPrefill(benchmark::State& state) {
  const int64_t T = 512, Hq = 32, Hkv = 8, D = 128;
  Tensor q = random_tensor({T, Hq, D}, DType::F32, 11);
  Tensor k = random_tensor({T, Hkv, D}, DType::BF16, 12), v = random_tensor({T, Hkv, D}, DType::BF16, 13);
  run(state, "attn_prefill", 2.0 * 2.0 * T * (T + 1) / 2 * Hq * D / 1e9, "GFLOPs",
      [&] { benchmark::DoNotOptimize(ops::attention(q, k, v, 0, 0.088f)); });
}
BENCHMARK(BM_AttentionPrefill)->Name("Attention/prefill")->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Embedding(benchmark::State& state) {
  Tensor w = random_tensor({32000, 4096}, DType::BF16, 14);
  std::vector<int64_t> ids(512);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 61 % 32000);
  Tensor t = Tensor::from_vector(ids, {512});
  run(state, "embedding", 512.0 * 4096 * (2 + 4) / 1e9, "GBps", [&] { benchmark::DoNotOptimize(ops::embedding(w, t)); });
}
BENCHMARK(BM_Embedding)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_Argmax(benchmark::State& state) {
  Tensor x = random_tensor({128256}, DType::F32, 15);
  run(state, "argmax", x.nbytes() / 1e9, "GBps", [&] { benchmark::DoNotOptimize(ops::argmax(x)); });
}
BENCHMARK(BM_Argmax)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
