// Loading a model for a run (generate, bench, demo): plan, print the plan, load with a progress bar.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "cli.h"
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
};

/// What was loaded, as `generate --json` ("model") and serve's /v1/models/{id} ("ferry") report it, and as the
/// Python model's attributes give it: {"architecture", "device_map" (the map that ran: hf_device_map),
/// "eos_token_ids", "chat_template" (its source; null when the model has none)}.
nlohmann::json loaded_model_json(const LoadedModel& lm, const text::ChatTemplate* chat);

/// Bytes this process has read from storage so far (/proc/self/io read_bytes: page-cache misses and direct reads).
std::uint64_t process_disk_read_bytes();

/// The end-of-run line on disk reads, empty when nothing is on disk. Direct: "disk io: direct (io_uring, O_DIRECT),
/// 12.3 MiB read per forward, 1.52 GB/s while reading, staging peak ..." (the reader's totals since loading);
/// mmap: "disk io: mmap (page cache), 1.2 GiB read from disk per forward" (from `read_bytes_before`, taken with
/// process_disk_read_bytes() before the run). `forwards`: the forwards of this run.
std::string disk_io_line(const LoadedModel& lm, std::size_t forwards, std::uint64_t read_bytes_before);

/// Host→device traffic since `h2d_before` (transfer_stats().host_to_device then) over `forwards` forwards taking
/// `seconds`: bytes per forward and GB/s. Empty when nothing crossed (cpu runs).
struct H2dTraffic {
  std::uint64_t bytes = 0;
  double bytes_per_forward = 0, gb_per_s = 0;
};
H2dTraffic h2d_traffic(std::uint64_t h2d_before, std::size_t forwards, double seconds);
/// "host→device: 1.02 GiB per forward, 41.3 GB/s", or "" when nothing crossed.
std::string h2d_line(const H2dTraffic& t);

/// Plans, prints the plan to `log` (nullptr: nothing), loads. Throws ferry::Error with what to do.
LoadedModel load_for_run(const ModelFlags& flags, std::FILE* log);

}  // namespace ferry::cli
