// Disk-offloaded forward with and without the prefetcher, against reading the same bytes, in the same run.
//
// A stack of Linear layers (bf16 weights, 4096 x 4096 = 32 MiB each; 24 layers, 768 MiB by default) is written to one
// safetensors file and run from there with disk_offload (weights served straight from the file, nothing copied), on
// inputs of 1 token (a decode step: the disk dominates) and 32 tokens (compute about as long as the reads: where
// overlapping them pays, as it does for any step whose compute is not negligible, e.g. on a slower device or with a
// faster disk).
//
//   Read      read() the file in 1 MiB blocks (what `cat` does): the I/O bound of a cold forward
//   Sync      forward with prefetch = 0: each layer's weights are read when its hook runs (Accelerate's behaviour)
//   Prefetch  forward with prefetch = 2: the next two layers' weights are read while one computes
// "cold" evicts the file from the page cache before every forward (posix_fadvise DONTNEED on this file only): a model
// bigger than RAM, whose weights come from disk on every step. "warm" leaves it cached: the prefetcher must cost
// nothing there. Rounds run Read, Sync and Prefetch back to back in rotating order; the table gives medians of the
// per-round ratios (this VM's disk speed drifts between minutes).
//
// Run: build-*/bench/bench_prefetch [--layers=24] [--dim=4096] [--tokens=1,32] [--rounds=7] [--dir=/tmp]
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/big_modeling/cpu_offload.h"
#include "ferry/core/thread_pool.h"
#include "ferry/io/safetensors.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/empty_weights.h"
#include "ferry/nn/hooks.h"
#include "ferry/nn/linear.h"

namespace fs = std::filesystem;
using namespace ferry;

namespace {

struct Config {
  int layers = 24;
  int64_t dim = 4096;
  int rounds = 7;
  std::vector<int64_t> tokens = {1, 32};
  std::string dir = "/tmp";
} config;

std::shared_ptr<nn::Sequential> make_model() {
  std::vector<std::shared_ptr<nn::Module>> layers;
  for (int i = 0; i < config.layers; ++i)
    layers.push_back(std::make_shared<nn::Linear>(config.dim, config.dim, /*bias=*/false, DType::BF16));
  return std::make_shared<nn::Sequential>(std::move(layers));
}

void write_checkpoint(const fs::path& file) {
  io::StateDict sd;
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < config.layers; ++i) {
    Tensor w = Tensor::empty({config.dim, config.dim}, DType::BF16);
    auto* p = w.data_as<uint16_t>();
    // Finite values of magnitude ~1/sqrt(dim), random signs: activations stay in range through the stack.
    for (int64_t k = 0; k < w.numel(); ++k) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      p[k] = static_cast<uint16_t>((s & 0x807F) | 0x3C00);
    }
    sd.insert(std::to_string(i) + ".weight", w);
  }
  io::save_safetensors(sd, file);
  const int fd = ::open(file.c_str(), O_RDONLY);
  ::fsync(fd);  // clean pages, so eviction works
  ::close(fd);
}

void evict(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double read_file(const fs::path& file) {
  static std::vector<char> buf(1 << 20);
  const auto t0 = std::chrono::steady_clock::now();
  const int fd = ::open(file.c_str(), O_RDONLY);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  while (::read(fd, buf.data(), buf.size()) > 0) {
  }
  ::close(fd);
  return seconds_since(t0);
}

struct Offloaded {
  std::shared_ptr<nn::Sequential> model;
  Offloaded(const fs::path& dir, int prefetch) {
    auto guard = nn::init_empty_weights();
    model = make_model();
    disk_offload(*model, dir, Device::cpu(), false, {}, prefetch);
  }
  double forward(const Tensor& x) {
    const auto t0 = std::chrono::steady_clock::now();
    Tensor y = (*model)(x);
    const double s = seconds_since(t0);
    if (!std::isfinite(y.to_vector<float>()[0])) std::fprintf(stderr, "non-finite output\n");
    return s;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--layers=", 0) == 0) config.layers = std::stoi(a.substr(9));
    else if (a.rfind("--dim=", 0) == 0) config.dim = std::stoll(a.substr(6));
    else if (a.rfind("--rounds=", 0) == 0) config.rounds = std::stoi(a.substr(9));
    else if (a.rfind("--dir=", 0) == 0) config.dir = a.substr(6);
    else if (a.rfind("--tokens=", 0) == 0) {
      config.tokens.clear();
      for (std::size_t pos = 9; pos < a.size();) {
        const std::size_t comma = std::min(a.find(',', pos), a.size());
        config.tokens.push_back(std::stoll(a.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    }
    else {
      std::fprintf(stderr, "usage: %s [--layers=N] [--dim=N] [--tokens=N,N] [--rounds=N] [--dir=PATH]\n", argv[0]);
      return 2;
    }
  }
  std::string tmpl = config.dir + "/ferry_bench_prefetch_XXXXXX";
  if (!::mkdtemp(tmpl.data())) {
    std::perror("mkdtemp");
    return 1;
  }
  const fs::path dir = tmpl, file = dir / "model.safetensors";
  write_checkpoint(file);
  const double gb = static_cast<double>(fs::file_size(file)) / 1e9;


  std::printf("## bench_prefetch: %d x Linear(%lld, %lld) bf16, %.2f GB on disk, %d threads, %d rounds\n\n",
              config.layers, static_cast<long long>(config.dim), static_cast<long long>(config.dim), gb,
              num_threads(), config.rounds);
  std::printf("| tokens | cache | read() | forward, sync | forward, prefetch | sync / prefetch (speed-up) | "
              "read / prefetch |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const int64_t tokens : config.tokens)
  for (bool cold : {true, false}) {
    std::vector<float> xv(static_cast<std::size_t>(tokens * config.dim), 0.5f);
    const Tensor x = Tensor::from_vector(xv, {tokens, config.dim});
    // Warm: one model each, kept. Cold: a new model each forward, because pages mapped into a live model cannot be
    // evicted (a model bigger than RAM loses them to reclaim instead, which this emulates).
    std::optional<Offloaded> warm_sync, warm_prefetch;
    if (!cold) warm_sync.emplace(dir, 0), warm_prefetch.emplace(dir, 2);
    auto forward = [&](int prefetch) {
      if (!cold) return (prefetch ? *warm_prefetch : *warm_sync).forward(x);
      Offloaded m(dir, prefetch);
      evict(file);
      return m.forward(x);
    };
    if (!cold) forward(0), forward(2);  // the first forwards confirm the layer order
    std::vector<double> t_read, t_sync, t_pre, speedup, bound;
    for (int round = 0; round < config.rounds; ++round) {
      double t[3];
      for (int k = 0; k < 3; ++k) {
        const int which = (k + round) % 3;
        if (cold && which == 0) evict(file);
        t[which] = which == 0 ? read_file(file) : forward(which == 1 ? 0 : 2);
      }
      t_read.push_back(t[0]), t_sync.push_back(t[1]), t_pre.push_back(t[2]);
      speedup.push_back(t[1] / t[2]);
      bound.push_back(t[0] / t[2]);
    }
    std::printf("| %lld | %s | %.0f ms (%.2f GB/s) | %.0f ms | %.0f ms | **%.2fx** | %.2fx |\n",
                static_cast<long long>(tokens), cold ? "cold" : "warm", median(t_read) * 1e3, gb / median(t_read), median(t_sync) * 1e3, median(t_pre) * 1e3, median(speedup),
                median(bound));
  }
  std::printf("\nMedians over rounds; the ratios are medians of per-round ratios. read / prefetch near 1: the forward "
              "runs at the speed of the disk.\n");
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
