// Empty construction of a 100B-parameter model (Accelerate's init_empty_weights example: 1000 × Linear(10000,
// 10000)), judged against a baseline measured in the same run: a forked process that builds nothing.
//   EmptyInit100B          wall time of one construction + destruction under init_empty_weights (goal < 50 ms).
//                          Counters: parameters (1.0001e11) and tensor_bytes (memory_stats(cpu) growth; must be 0).
//   PeakRssGrowth100B      a forked child resets its peak RSS (/proc/self/clear_refs "5"), builds the model once
//                          and reports VmHWM growth (after malloc_trim, so freed parent heap is not reused); a second child does the same without building. Counters:
//                          build_MiB, baseline_MiB and above_baseline_MiB (goal < 10 MiB).
// Run: build-*/bench/bench_empty_init --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "ferry/core/memory.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/empty_weights.h"
#include "ferry/nn/linear.h"

namespace {

using namespace ferry;

std::unique_ptr<nn::ModuleList> build_100b() {
  auto guard = nn::init_empty_weights();
  auto model = std::make_unique<nn::ModuleList>();
  for (int i = 0; i < 1000; ++i) model->push_back(std::make_shared<nn::Linear>(10000, 10000));
  return model;
}

void EmptyInit100B(benchmark::State& state) {
  const int64_t bytes_before = memory_stats(Device::cpu()).current;
  int64_t parameters = 0;
  for (auto _ : state) {
    auto model = build_100b();
    benchmark::DoNotOptimize(model.get());
    if (parameters == 0)
      for (const auto& [name, t] : model->named_parameters()) parameters += t.numel();
  }
  state.counters["parameters"] = static_cast<double>(parameters);
  state.counters["tensor_bytes"] = static_cast<double>(memory_stats(Device::cpu()).current - bytes_before);
}
BENCHMARK(EmptyInit100B)->Unit(benchmark::kMillisecond);

// VmHWM (peak resident set) in KiB, or -1.
long peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// Runs (build ? build_100b : nothing) in a fresh child and returns its peak-RSS growth in KiB (-1 on failure).
long child_peak_growth_kib(bool build) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(fds[0]);
    malloc_trim(0);  // return heap pages the parent freed, so the build cannot hide in them
    { std::ofstream("/proc/self/clear_refs") << "5"; }  // peak RSS := current RSS
    const long before = peak_rss_kib();
    if (build) {
      auto model = build_100b();
      benchmark::DoNotOptimize(model.get());
    }
    const long growth = peak_rss_kib() - before;
    (void)!write(fds[1], &growth, sizeof growth);
    _exit(0);
  }
  close(fds[1]);
  long growth = -1;
  if (read(fds[0], &growth, sizeof growth) != sizeof growth) growth = -1;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return growth;
}

void PeakRssGrowth100B(benchmark::State& state) {
  long built = 0, baseline = 0;
  for (auto _ : state) {
    built = child_peak_growth_kib(true);
    baseline = child_peak_growth_kib(false);
  }
  if (built < 0 || baseline < 0) state.SkipWithError("could not measure peak RSS (/proc/self/clear_refs)");
  state.counters["build_MiB"] = built / 1024.0;
  state.counters["baseline_MiB"] = baseline / 1024.0;
  state.counters["above_baseline_MiB"] = (built - baseline) / 1024.0;
}
BENCHMARK(PeakRssGrowth100B)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
