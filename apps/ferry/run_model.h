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
};

/// Plans, prints the plan to `log` (nullptr: nothing), loads. Throws ferry::Error with what to do.
LoadedModel load_for_run(const ModelFlags& flags, std::FILE* log);

/// tokenizer.json of the folder (throws when absent).
text::Tokenizer load_tokenizer(const std::string& folder);

}  // namespace ferry::cli
