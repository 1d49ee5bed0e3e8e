// End-to-end model speed on a TinyLlama-shaped Llama (hidden 2048, 22 layers, 32 heads, 4 KV heads, intermediate
// 5632, vocab 32000, untied head: 1.1B parameters) with random f16 weights built in memory, resident on the cpu
// (FERRY_BENCH_DTYPE=bf16: bf16 weights, the same values rounded).
//   Prefill512     one forward over a 512-token prompt. Counter tokens_per_s.
//   Decode128      after a 512-token prefill, 128 greedy decode steps (one token per forward, KV cache), each followed
//                  by one pass of the read baseline (all threads summing a 1 GiB buffer), so both are measured in the
//                  same windows of the same run. Counters: tokens_per_s; read_GBps, the baseline's mean over those
//                  passes (read_GBps_best: its fastest pass); weight_GB_per_token, the bytes of weights one decode step
//                  must stream (every parameter once, except the embedding, of which one row is read);
//                  bound_tokens_per_s = read_GBps / weight_GB_per_token; fraction_of_bound = tokens_per_s /
//                  bound_tokens_per_s; fraction_of_bound_median is the median over steps of each step against the
//                  pass right after it; fraction_of_bound_best compares the fastest step with the fastest pass;
//                  gemv_only_fraction_median is the same median for the step's matrix-vector products alone (every
//                  weight times a vector through ops::linear, timed every 8th step), i.e. the kernel's share.
//                  KV-cache reads (f32, 45 KiB per token of context, < 2% of the weights here) are not counted.
// Run: build-*/bench/bench_model   (FERRY_NUM_THREADS sets the threads; the figures depend on what else runs)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <memory>
#include <numeric>
#include <vector>

#include "ferry/core/thread_pool.h"
#include "ferry/models/auto_model.h"
#include "ferry/nn/empty_weights.h"
#include "ferry/nn/module_tensors.h"
#include "ferry/ops/gather.h"
#include "ferry/ops/linear.h"

namespace {

using namespace ferry;
using Clock = std::chrono::steady_clock;

nlohmann::json tinyllama_config() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 32000},
          {"hidden_size", 2048}, {"intermediate_size", 5632}, {"num_hidden_layers", 22}, {"num_attention_heads", 32},
          {"num_key_value_heads", 4}, {"max_position_embeddings", 2048}, {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0}, {"tie_word_embeddings", false}};
}

// Uniform values with the variance of the reference tests' weights: projections N(0, 1/fan_in)-like, embeddings
// unit variance, norm weights 1. A cheap xorshift keeps building 1.1B parameters to a few seconds.
// The weights' dtype: f16, or bf16 with FERRY_BENCH_DTYPE=bf16.
DType weight_dtype() {
  const char* v = std::getenv("FERRY_BENCH_DTYPE");
  return v && std::string(v) == "bf16" ? DType::BF16 : DType::F16;
}

Tensor random_weights(const Shape& shape, double half_width, uint64_t seed) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  parallel_for(0, static_cast<int64_t>(v.size()), 1 << 20, [&](int64_t b, int64_t e) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(b) + 1;
    for (int64_t i = b; i < e; ++i) {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      const double u = static_cast<double>(s >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
      v[static_cast<std::size_t>(i)] = static_cast<float>((2 * u - 1) * half_width);
    }
  });
  return Tensor::from_vector(v, shape, weight_dtype());
}

std::shared_ptr<models::CausalLM> build_model() {
  const models::ConfigJson config = models::ConfigJson::from_json(tinyllama_config());
  std::shared_ptr<models::CausalLM> model;
  {
    auto guard = nn::init_empty_weights();
    model = models::AutoModelForCausalLM::from_config(config, weight_dtype());
  }
  uint64_t seed = 1;
  for (const auto& [name, t] : model->named_parameters()) {
    const Shape shape = t.shape();
    double half_width = 1.7320508;  // U(-√3, √3): unit variance (embeddings)
    if (shape.size() == 1) {
      nn::set_module_tensor_to_device(*model, name, Device::cpu(), Tensor::full(shape, 1.0, weight_dtype()));
      continue;
    }
    if (name.find("embed_tokens") == std::string::npos) half_width /= std::sqrt(static_cast<double>(shape[1]));
    nn::set_module_tensor_to_device(*model, name, Device::cpu(), random_weights(shape, half_width, seed++));
  }
  return model;
}

models::CausalLM& model() {
  static std::shared_ptr<models::CausalLM> m = build_model();
  return *m;
}

Tensor prompt(int64_t n) {
  std::vector<int64_t> ids(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = (i * 7919 + 13) % 32000;
  return Tensor::from_vector(ids, {n});
}

// Bytes of weights one decode step reads: every parameter once, the embedding table only one row.
double weight_bytes_per_token(const models::CausalLM& m) {
  double bytes = 0;
  for (const auto& [name, t] : m.named_parameters()) {
    if (name == "model.embed_tokens.weight")
      bytes += static_cast<double>(t.size(1)) * static_cast<double>(dtype_size(t.dtype()));
    else
      bytes += static_cast<double>(t.nbytes());
  }
  return bytes;
}

// The DRAM baseline: all threads sum disjoint parts of a 1 GiB buffer (far beyond the caches), four independent
// accumulators per thread. The buffer comes from the same allocator as the weights (huge pages where the kernel
// gives them), so both sides stream the same kind of memory. One call = one timed pass; returns bytes/s.
class ReadBaseline {
 public:
  ReadBaseline() : buf_(Tensor::empty({int64_t{1} << 27}, DType::I64)) {
    uint64_t* p = static_cast<uint64_t*>(buf_.raw_data());
    parallel_for(0, words(), 1 << 20, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = static_cast<uint64_t>(i);
    });
  }
  double pass() {
    const auto t0 = Clock::now();
    std::atomic<uint64_t> total{0};
    const uint64_t* p = static_cast<const uint64_t*>(buf_.raw_data());
    parallel_for(0, words(), 1 << 22, [&](int64_t b, int64_t e) {
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = b;
      for (; i + 4 <= e; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
      }
      for (; i < e; ++i) s0 += p[i];
      total += s0 + s1 + s2 + s3;
    });
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    benchmark::DoNotOptimize(total.load());
    return static_cast<double>(buf_.nbytes()) / s;
  }

 private:
  int64_t words() const { return buf_.numel(); }
  Tensor buf_;
};

void Prefill512(benchmark::State& state) {
  models::CausalLM& m = model();
  const Tensor ids = prompt(512);
  for (auto _ : state) {
    auto cache = m.make_cache();
    Tensor logits = m.logits(ids, cache, 1);
    benchmark::DoNotOptimize(logits.raw_data());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(512.0 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["threads"] = num_threads();
}
BENCHMARK(Prefill512)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

// The decode step's matrix-vector products alone: every 2-D weight except the embedding times a vector, through the
// same ops::linear the model calls. Returns seconds; the gap between this and a decode step is everything else.
double gemv_chain_seconds(const models::CausalLM& m) {
  std::vector<Tensor> inputs;
  const auto t0 = Clock::now();
  for (const auto& [name, t] : m.named_parameters()) {
    if (t.dim() != 2 || name == "model.embed_tokens.weight") continue;
    Tensor y = ops::linear(Tensor::full({1, t.size(1)}, 1.0, DType::F32), t);
    benchmark::DoNotOptimize(y.raw_data());
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void Decode128(benchmark::State& state) {
  models::CausalLM& m = model();
  ReadBaseline baseline;
  const double bytes_per_token = weight_bytes_per_token(m);
  // The host's bandwidth drifts with what its neighbours do, so the baseline is measured between decode steps: one
  // read pass after each step, and each ratio compares windows a few tens of milliseconds apart.
  double decode_seconds = 0, read_seconds = 0, best_step = 1e30, best_read = 0;
  int64_t steps = 0, passes = 0;
  std::vector<double> pair_fractions;  // per step: (bytes / that step's read pass) / step time
  std::vector<double> gemv_fractions;  // the same for the matrix-vector products alone, every 8th step
  for (auto _ : state) {
    state.PauseTiming();
    auto cache = m.make_cache();
    cache->reserve(512 + 128);
    Tensor last = m.logits(prompt(512), cache, 1);
    state.ResumeTiming();
    for (int step = 0; step < 128; ++step) {
      const auto t0 = Clock::now();
      const Tensor next = ops::argmax(last);  // [1]
      last = m.logits(next, cache, 1);
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      decode_seconds += s;
      best_step = std::min(best_step, s);
      ++steps;
      state.PauseTiming();
      const double bw = baseline.pass();
      read_seconds += static_cast<double>(std::size_t(1) << 30) / bw;
      best_read = std::max(best_read, bw);
      pair_fractions.push_back((bytes_per_token / bw) / s);
      if (step % 8 == 0) gemv_fractions.push_back((bytes_per_token / bw) / gemv_chain_seconds(m));
      ++passes;
      state.ResumeTiming();
    }
  }
  const double tokens_per_s = static_cast<double>(steps) / decode_seconds;
  const double read_mean = static_cast<double>(passes) * static_cast<double>(std::size_t(1) << 30) / read_seconds;
  const double bound = read_mean / bytes_per_token;
  state.counters["tokens_per_s"] = tokens_per_s;
  state.counters["read_GBps"] = read_mean / 1e9;
  state.counters["read_GBps_best"] = best_read / 1e9;
  state.counters["weight_GB_per_token"] = bytes_per_token / 1e9;
  state.counters["bound_tokens_per_s"] = bound;
  state.counters["fraction_of_bound"] = tokens_per_s / bound;
  // The median over steps of each step against the read pass right after it: robust to a neighbour's burst.
  std::sort(pair_fractions.begin(), pair_fractions.end());
  state.counters["fraction_of_bound_median"] = pair_fractions[pair_fractions.size() / 2];
  std::sort(gemv_fractions.begin(), gemv_fractions.end());
  state.counters["gemv_only_fraction_median"] = gemv_fractions[gemv_fractions.size() / 2];
  // The same with each side's best window: the fastest decode step against the fastest read pass.
  state.counters["fraction_of_bound_best"] = (1.0 / best_step) / (best_read / bytes_per_token);
  state.counters["threads"] = num_threads();
}
BENCHMARK(Decode128)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
