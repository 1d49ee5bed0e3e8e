// Loading a model for a run (generate, bench, demo): plan, print the plan, load with a progress bar.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "cli.h"
#include "ferry/models/causal_lm.h"
#include "ferry/text/tokenizer.h"

namespace ferry::cli {

struct LoadedModel {
  std::shared_ptr<models::CausalLM> model;
  PlannedModel plan;
  DType dtype = DType::F32;
  double load_seconds = 0;
  /// Bytes of weights materialised from cpu/disk for every forward (0 when everything is resident).
  int64_t streamed_bytes_per_forward = 0;
  /// Weight bytes per device as planned.
  MaxMemory usage;
  std::vector<text::TokenId> eos_token_ids;  // config.json / generation_config.json
  /// The reader of disk-placed weights when they are read direct (plan.offload_io), for the end-of-run figures.
  std::shared_ptr<io::StagedReader> staged_reader;
};

/// "disk io: direct (io_uring, O_DIRECT), 12.3 MiB read per token, 1.52 GB/s while reading" or "disk io: mmap
/// (page cache)"; empty when nothing is on disk. `forwards`: the forwards run since loading.
std::string disk_io_line(const LoadedModel& lm, std::size_t forwards);

/// Plans, prints the plan to `log` (nullptr: nothing), loads. Throws ferry::Error with what to do.
LoadedModel load_for_run(const ModelFlags& flags, std::FILE* log);

/// tokenizer.json of the folder (throws when absent).
text::Tokenizer load_tokenizer(const std::string& folder);

}  // namespace ferry::cli
