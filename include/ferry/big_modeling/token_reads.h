// What generation reads from each device that does not compute (beyond Accelerate): per generated token and per
// prompt, for a device map. `ferry plan` prints it for Accelerate's plan and the cost-aware one
// (PlanStrategy::Fast), so a user sees what each costs.
//
// Modules fall in three kinds: dense modules run for every generated token; an expert (mixtures of experts) runs
// for the tokens routed to it, top_k of E per layer; a prompt module (a seq2seq model's encoder, its decoder's
// cross-attention key and value projections) runs once per prompt. A prompt reads everything placed off the
// compute device once (its many tokens route to every expert, in expectation). A table looked up by the row (an
// embedding, nn::Module::row_lookup_parameter) costs one row per token: its offloading hook reads only the rows a
// call uses — unless it is tied to a parameter read whole (an lm_head sharing the embedding's weight).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ferry/big_modeling/device_map.h"
#include "ferry/core/dtype.h"
#include "ferry/nn/module.h"

namespace ferry {

/// Which modules generation does not read for every token (models: LanguageModelInfo::read_profile()).
struct ReadProfile {
  std::vector<std::string> expert_classes;  ///< experts' module classes
  double routed_fraction = 0.0;             ///< the share of its experts a token reads: top_k / E
  std::vector<std::string> prompt_modules;  ///< names of the modules that run once per prompt
};

/// What generation reads from one device other than the one that computes (disk; the cpu when a GPU computes).
struct TokenReads {
  Device device;
  int64_t dense_bytes = 0;      ///< read for every token
  int64_t expert_bytes = 0;     ///< every expert placed there
  int64_t prompt_bytes = 0;     ///< prompt modules placed there (read once per prompt)
  int64_t table_bytes = 0;      ///< tables read by the row placed there (row_lookup_tables)
  int64_t table_row_bytes = 0;  ///< one row of each of them: what a token reads of them
  /// Per generated token: dense_bytes + routed_fraction · expert_bytes + table_row_bytes.
  double expected_bytes = 0;
  /// Per prompt: everything placed there once, but the tables' rows (a few per prompt token).
  int64_t prompt_read_bytes() const noexcept { return dense_bytes + expert_bytes + prompt_bytes; }
};

/// The parameters that generation reads by the row — tables that modules look rows up in
/// (nn::Module::row_lookup_parameter) and that nothing reads whole — under every name of each (tied groups).
std::vector<std::string> row_lookup_tables(const nn::Module& model);

/// One row per device read from (none when everything lives on `compute`), in the order disk, cpu. Bytes per
/// compute_module_sizes with `dtype`. Offloaded weights are read by the module that uses them when it runs (dispatch
/// hooks each module with weights inside an offloaded entry, as Accelerate does), so a tensor counts as its innermost
/// enclosing expert's or prompt module's: a T5 block on disk reads its cross-attention key and value projections only
/// for the prompt, in either plan.
std::vector<TokenReads> per_token_reads(const nn::Module& model, const DeviceMap& map, Device compute,
                                        const ReadProfile& profile, std::optional<DType> dtype = std::nullopt);

/// Σ expected_bytes over `reads`: the bytes a generated token reads off the compute device.
double token_read_bytes(const std::vector<TokenReads>& reads);

}  // namespace ferry
