// Shared pieces of the `ferry` subcommands: the model flags every command takes (Hugging Face names and
// llama.cpp short forms), budget/device-map parsing, tables, the load progress bar, and exit codes.
//
// Exit codes: 0 success; 1 a ferry::Error (bad file, impossible budget, ...: the message says what to do);
// 2 bad command line; 3 an unexpected internal error (a bug: please report it).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/big_modeling/device_map.h"
#include "ferry/big_modeling/experts.h"
#include "ferry/big_modeling/load_checkpoint.h"
#include "ferry/big_modeling/max_memory.h"
#include "ferry/big_modeling/offload_plan.h"
#include "ferry/models/auto_model.h"

namespace ferry::cli {

inline constexpr int kExitOk = 0, kExitError = 1, kExitUsage = 2, kExitInternal = 3;

/// Flags that say which model and where it runs.
struct ModelFlags {
  std::string model;              // -m / --model: a Hugging Face folder
  std::string device_map;         // auto | balanced | balanced_low_0 | sequential | cpu | FILE.json
  std::string max_memory;         // "0=20GiB,cpu=64GiB"
  std::string offload_folder;
  std::string dtype;              // f32 | f16 | bf16 ...
  std::string quantize;           // q8_0 | q4_0 | ... | q6_k: quantize Linear/Embedding weights at load
  std::vector<std::string> no_split;
  int64_t context = 0;            // tokens a sequence may hold: reserved in the plan, a stop (0: the model's context)
  bool no_disk = false;           // never plan onto disk: a model that does not fit is an error
  int threads = 0;                // -t; 0 = all cores
  std::string isa;                // --isa scalar | avx2 | avx512 | amx: cap the CPU kernels (FERRY_ISA)
  int prefetch = kPrefetchAuto;   // offloaded modules read ahead; 0 = synchronous (Accelerate); auto = measured
  std::string offload_io = "auto";  // auto | direct | mmap: how disk-placed weights are read
  bool no_mmap = false, mmap = false;  // cpu-placed weights copied / kept as checkpoint views (neither: auto)
  bool mlock = false;                  // lock cpu-placed weights in RAM
  // Mixtures of experts
  std::string experts;                // "" | cpu | disk: every expert there (llama.cpp's --cpu-moe)
  int64_t n_cpu_moe = 0;              // the experts of the first N layers on the cpu (llama.cpp's --n-cpu-moe)
  std::string moe_plan = "experts";   // experts: each expert a unit, dense parts first | layers: Accelerate's plan
  std::string expert_cache = "auto";  // RAM for an LRU cache of the experts read from disk: auto | a size | 0
  std::string guess_experts = "off";  // on | off: read the next layer's likely experts ahead (guess_experts)
  // Pipelines over ranks (mpirun)
  int micro_batches = 0;  // a forward over several sequences split into this many (0: one per rank)

  /// --expert-cache as bytes (not for "auto"); throws ferry::Error naming the flag.
  int64_t expert_cache_bytes_value() const;
  /// Registers the flags on `cmd`; `positional_model` also accepts the folder as the first positional argument.
  void add_to(CLI::App& cmd, bool positional_model = false);
  /// Applies -t; checks the folder exists.
  void apply() const;
  std::optional<DType> dtype_value() const;
  /// --quantize as a DType (nullopt when absent); throws ferry::Error for a type that is not quantized.
  std::optional<DType> quantize_value() const;
  std::optional<MaxMemory> max_memory_value() const;
  /// The device map as from_pretrained takes it (unset when --device-map was not given).
  std::variant<std::monostate, std::string, DeviceMap> device_map_value() const;
  models::FromPretrainedOptions from_pretrained_options() const;
};

/// "0=20GiB,cpu=64GiB,disk=1TB" -> MaxMemory. Throws ferry::Error naming the bad entry.
MaxMemory parse_max_memory_flag(const std::string& text);

/// A comma-separated list of integers ("1,2,3"). Throws ferry::Error naming the bad item.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag);

/// The CPU kernels in use, for `ferry inspect` and `ferry bench`: "amx (bf16 linear layers on AMX tiles, the rest
/// AVX-512), 2 threads", with the reason when the CPU lists AMX and it is not used.
std::string cpu_kernels_description();

/// True when stdout is a terminal (progress bars and colours only then).
bool stdout_is_tty();
bool stderr_is_tty();

/// Prints rows as an aligned text table (first row = header).
void print_table(std::FILE* out, const std::vector<std::vector<std::string>>& rows);

/// A load progress bar on stderr: redrawn in place on a terminal; on a pipe, one plain line per shard (no
/// control characters).
class ProgressBar {
 public:
  explicit ProgressBar(std::string label);
  void update(const LoadProgress& p);
  void finish();

 private:
  std::string label_;
  bool tty_;
  std::size_t last_shard_ = 0;
  double start_;
  double last_draw_ = -1;
  bool finished_ = false;
};

/// Plan for `skeleton` as the flags ask: the mode or map, budgets, the KV-cache reservation for --context.
struct PlannedModel {
  DeviceMap device_map;
  PlanOptions options;  // what it was planned with (budgets, reservations), for format_plan
  OffloadIoChoice offload;  // how the disk part is read (--offload-io resolved) and the staging pool reserved for it
  models::ExpertsInfo experts;  // the model's experts (num_experts 0: dense)
  /// What a generated token reads from each device other than the one computing (experts at top_k / E).
  std::vector<TokenReads> token_reads;
  /// RAM for the LRU cache of experts read from disk (--expert-cache; auto: what the plan leaves of the cpu budget,
  /// at most the experts on disk). 0 for dense models and plans with no expert on disk.
  int64_t expert_cache_bytes = 0;
  /// A mode plan ("auto" or "fast") of a model with prompt modules or experts: what each of the two strategies
  /// would read per generated token and per prompt with the same budget, so `ferry plan` can show why.
  struct StrategyReads {
    std::string mode;  // "auto" (Accelerate's order) or "fast"
    bool chosen = false;
    std::vector<TokenReads> reads;
  };
  std::vector<StrategyReads> strategies;
};
/// The plan the flags ask for (mode or file, budgets, reservations, the offload-io choice), with --experts /
/// --n-cpu-moe applied and the per-token reads counted.
PlannedModel plan_model(const models::LanguageModel& skeleton, const ModelFlags& flags, DType dtype);
/// The same before --experts / --n-cpu-moe and the per-token counts.
PlannedModel plan_model_unplaced(const models::LanguageModel& skeleton, const ModelFlags& flags, DType dtype);

/// The plan as a table (module, device, bytes, dtype) and totals per device including reservations.
void print_plan(std::FILE* out, const nn::Module& skeleton, const PlannedModel& plan);
/// "cpu weights: zero-copy views of the checkpoint ..." or "copied ..." (--no-mmap, --mmap, --mlock resolved).
void print_cpu_weights(std::FILE* out, const ModelFlags& flags, const PlannedModel& plan);

/// The architecture of `folder`'s config.json (or a GGUF file's metadata) built empty (meta, no bytes) with weights
/// of `dtype`: a decoder-only or an encoder-decoder model.
std::shared_ptr<models::LanguageModel> build_skeleton(const std::string& folder, DType dtype);
/// The same with the storage dtypes loading will give the weights: --quantize's type, or a GGUF file's quantized
/// types (unless --dtype asks to dequantize), so the plan counts the bytes that will really be loaded.
std::shared_ptr<models::LanguageModel> build_skeleton(const ModelFlags& flags, DType dtype);
/// "q4_k + f32" — the dtypes of `model`'s parameters, the one holding most bytes first.
std::string weights_dtypes(const nn::Module& model);
/// --dtype, else config.json's dtype, else f32.
DType flags_dtype(const ModelFlags& flags);

/// The KV cache and activation bytes a context of `tokens` needs for this model in f32.
int64_t kv_cache_bytes(const models::LanguageModelInfo& info, int64_t tokens);

}  // namespace ferry::cli
