// The built-in demo model: a Llama-architecture folder with random weights (config.json, sharded
// safetensors, a synthetic SentencePiece-style tokenizer.json), made once and cached.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace ferry::cli {

struct DemoShape {
  std::string arch = "llama";      // "llama" or "t5" (T5 v1.1: gated-gelu, untied head; layers = encoder = decoder)
  std::string name = "tinyllama";  // "tinyllama" (TinyLlama-1.1B's shape, ~2.2 GB in bf16) or "tiny" (a few MB, for tests)
  int64_t hidden = 2048, intermediate = 5632, layers = 22, heads = 32, kv_heads = 4, vocab = 32000;
};
/// --size (tinyllama | tiny) for --arch llama; for --arch t5: "t5-base" (T5 v1.1 base's shape, d_model 768, 12 + 12
/// layers, ~0.5 GB in bf16) or "tiny".
DemoShape demo_shape(const std::string& name, const std::string& arch = "llama");

/// $XDG_CACHE_HOME/ferry (else ~/.cache/ferry).
std::filesystem::path ferry_cache_dir();

/// Writes the folder if it is not complete yet (a marker file is written last); returns its path.
std::filesystem::path ensure_demo_model(const DemoShape& shape, const std::filesystem::path& cache_dir);

}  // namespace ferry::cli
