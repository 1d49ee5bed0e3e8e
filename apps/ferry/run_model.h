// Loading a model for a run (generate, bench, demo): plan, print the plan, load with a progress bar.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "cli.h"
#include "ferry/big_modeling/dispatch.h"  // ExpertCache
#include "ferry/io/disk_bandwidth.h"
#include "ferry/models/language_model.h"
#include "ferry/text/pretrained.h"
#include "ferry/text/tokenizer.h"

namespace ferry::cli {

struct LoadedModel {
  std::shared_ptr<models::LanguageModel> model;  // decoder-only or encoder-decoder
  std::string architecture;
  PlannedModel plan;
  DType dtype = DType::F32;
  double load_seconds = 0;
  /// Bytes of weights materialised from cpu/disk for every forward (0 when everything is resident).
  int64_t streamed_bytes_per_forward = 0;
  /// Weight bytes per device as planned.
  MaxMemory usage;
  std::vector<text::TokenId> eos_token_ids;  // text::load_eos_token_ids
  /// The reader of disk-placed weights when they are read direct (plan.offload), for the end-of-run figures.
  std::shared_ptr<io::StagedReader> staged_reader;
  std::shared_ptr<Prefetcher> prefetcher;  // null with --prefetch 0
  /// Mixtures of experts with experts on disk: their LRU cache in RAM (hits, misses), else null.
  std::shared_ptr<ExpertCache> expert_cache;
  int prefetch_setting = kPrefetchAuto;  // --prefetch
  /// The O_DIRECT bound of the disk holding the model (io/disk_bandwidth.h), when measured (runs that read direct
  /// measure it once per device and cache it).
  std::optional<io::DiskBandwidth> disk_bound;
};

/// What was loaded, as `generate --json` ("model") and serve's /v1/models/{id} ("ferry") report it, and as the
/// Python model's attributes give it: {"architecture", "device_map" (the map that ran: hf_device_map),
/// "eos_token_ids", "chat_template" (its source; null when the model has none)}.
nlohmann::json loaded_model_json(const LoadedModel& lm, const text::ChatTemplate* chat);

/// Host→device traffic since `h2d_before` (transfer_stats().host_to_device then) over `forwards` forwards taking
/// `seconds`: bytes per forward and GB/s. Empty when nothing crossed (cpu runs).
struct H2dTraffic {
  std::uint64_t bytes = 0;
  double bytes_per_forward = 0, gb_per_s = 0;
};
H2dTraffic h2d_traffic(std::uint64_t h2d_before, std::size_t forwards, double seconds);
/// "host→device: 1.02 GiB per forward, 41.3 GB/s", or "" when nothing crossed.
std::string h2d_line(const H2dTraffic& t);

/// The weight files of a model folder (.safetensors, .gguf, .bin), or the GGUF file itself; sorted.
std::vector<std::filesystem::path> weight_files(const std::filesystem::path& model);

/// The O_DIRECT bound of the disk holding `model` (a folder or a GGUF file): cached, else measured on its weight
/// files (when they hold 256 MiB or more), cached and said on `log`; nullopt when it cannot be measured.
std::optional<io::DiskBandwidth> disk_bound_for(const std::filesystem::path& model, std::FILE* log);

/// Plans, prints the plan to `log` (nullptr: nothing), loads. Throws ferry::Error with what to do.
LoadedModel load_for_run(const ModelFlags& flags, std::FILE* log);

/// A speculative decoding draft (--draft-model PATH) for `target` (loaded from `target_path`): loaded whole on the
/// cpu, quietly. Throws ferry::Error naming both paths when it cannot be loaded or cannot propose for the target
/// (text::check_draft_model).
LoadedModel load_draft_model(const std::string& path, const LoadedModel& target, const std::string& target_path);

}  // namespace ferry::cli
