// Speculation: one sequence's speculative decoding between forwards (include/ferry/text/speculative.h) — what it
// proposes next (its proposers, the number adapting to what is kept, the gate that pauses proposing where it does not
// pay) and, after the forward, which proposals stand (replay, or speculative sampling's rule for drawn ones) and the
// rollback of the rest. generate() runs one (speculative.cc); BatchGenerator gives each sequence of a batch its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "ferry/models/language_model.h"
#include "ferry/text/speculative.h"
#include "proposer.h"
#include "sequence_decoder.h"
#include "speculation_gate.h"

namespace ferry::text::detail {

class Speculation {
 public:
  /// `proposer` (not owned) guesses; at most `most` (>= 1) tokens per step. Throws ferry::Error for most < 1.
  Speculation(Proposer& proposer, int64_t most);

  /// The tokens to check after the sequence's next token, which seq.tokens() ends with: none while the gate pauses
  /// proposing, never more than `room` (what the sequence may still hold past that token). Valid until the next call.
  const std::vector<TokenId>& propose(const SequenceDecoder& seq, int64_t room);

  struct Outcome {
    std::size_t kept = 0;         ///< proposals kept
    std::optional<TokenId> next;  ///< the token the next forward takes; unset when the sequence stopped
  };
  /// The forward's logits for the next token and the proposals: 1 + proposals rows of `vocab` at `rows`. Gives the
  /// sequence's decoder its tokens (kept proposals, then the model's own), crops `state` — which held `held` tokens
  /// before the forward — to what stands, and tells the gate the step took `seconds` (the forward's; proposing's is
  /// added here).
  Outcome verify(SequenceDecoder& seq, const float* rows, std::size_t vocab, int64_t max_length,
                 models::SequenceState& state, int64_t held, double seconds);

  /// The counts so far (draft_forwards included).
  SpeculativeStats stats() const;

 private:
  Proposer& proposer_;
  int64_t most_, k_;
  SpeculationGate gate_;
  std::vector<TokenId> proposals_;
  bool asked_ = false;  // this step proposed, or ran the draft for nothing (its cost is still the step's)
  double propose_seconds_ = 0;
  double draft_forward_seconds_ = 0, step_seconds_ = 0;  // averages (the newest weighs 1/4): the draft's cost ratio
  std::vector<double> p_;  // the model's distribution at a checked position (speculative sampling)
  SpeculativeStats stats_;
};

}  // namespace ferry::text::detail
