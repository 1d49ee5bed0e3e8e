// generate()'s loop with a proposer (speculative.cc; include/ferry/text/speculative.h).
#pragma once

#include <vector>

#include "ferry/text/generate.h"
#include "proposer.h"

namespace ferry::text::detail {

/// The proposers options.speculative asks for: prompt lookup first, the draft model where lookup has no guess.
/// Throws ferry::Error for a draft that cannot stand in for `model` (proposer.h, check_draft).
std::unique_ptr<Proposer> make_proposer(models::LanguageModel& model, const std::vector<int64_t>& prompt,
                                        const GenerateOptions& options);

/// The most proposals per step the options allow: prompt lookup's number, else the draft's.
inline int64_t proposals_per_step(const SpeculativeOptions& spec) {
  return spec.lookup_tokens > 0 ? spec.lookup_tokens : spec.max_proposals;
}

/// Generates one sequence as generate() does, checking up to `most` of `proposer`'s tokens in each forward (the
/// number adapts, speculative.h). `max_length` from sequence_max_length. Fills GenerateResult::speculative;
/// prompt_ids and prompt_tokens are the caller's.
GenerateResult speculative_generate(models::LanguageModel& model, const Tokenizer* tokenizer,
                                    const std::vector<int64_t>& prompt, int64_t max_length,
                                    const GenerateOptions& options, const TokenCallback& on_token, Proposer& proposer,
                                    int64_t most);

}  // namespace ferry::text::detail
