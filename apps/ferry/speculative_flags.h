// The speculative decoding flags `ferry generate` and `ferry serve` share: --lookup, --draft-model, --draft-max,
// --draft-p-min, --draft-greedy (text/speculative.h); and the counts --json reports.
#pragma once

#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "ferry/text/speculative.h"

namespace ferry::cli {

struct SpeculativeFlags {
  int64_t lookup = 0;         // --lookup N: prompt lookup
  std::string draft_model;    // --draft-model PATH: a draft model (folder or GGUF)
  int64_t draft_max = 8;      // --draft-max K
  double draft_p_min = -1;    // --draft-p-min P (-1: auto)
  bool draft_greedy = false;  // --draft-greedy

  /// Adds the flags to `cmd`; `per_request`: say how a server's request overrides them.
  void add_to(CLI::App& cmd, bool per_request);
  /// The options these flags give, with `draft` the loaded --draft-model (null: none).
  text::SpeculativeOptions options(models::LanguageModel* draft) const;
};

/// A generation's speculative counts as `--json` reports them (proposed, accepted, acceptance_rate, target_forwards,
/// draft_forwards).
nlohmann::json speculative_json(const text::SpeculativeStats& s);

}  // namespace ferry::cli
