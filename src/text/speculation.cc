// Speculation (speculation.h).
#include "speculation.h"

#include <algorithm>

#include "ferry/core/error.h"

namespace ferry::text::detail {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

Speculation::Speculation(Proposer& proposer, int64_t most) : proposer_(proposer), most_(most), k_(most) {
  if (most < 1)
    throw Error(ErrorKind::InvalidValue, "speculative decoding needs at least one proposal per step", "generate",
                "set the proposals per step (--lookup N, --draft-max K) to 1 or more");
}

const std::vector<TokenId>& Speculation::propose(const SequenceDecoder& seq, int64_t room) {
  const auto t0 = Clock::now();
  proposals_.clear();
  const std::size_t draft_before = proposer_.draft_forwards();
  if (gate_.propose_now() && room > 0) proposals_ = proposer_.propose(seq.tokens(), std::min(k_, room));
  propose_seconds_ = seconds_since(t0);
  asked_ = !proposals_.empty() || proposer_.draft_forwards() != draft_before;
  // The draft's first call also reads the prompt: its forwards are timed from the second on.
  if (const std::size_t n = proposer_.draft_forwards() - draft_before; n > 0 && draft_before > 0) {
    const double each = propose_seconds_ / static_cast<double>(n);
    draft_forward_seconds_ = draft_forward_seconds_ > 0 ? draft_forward_seconds_ + (each - draft_forward_seconds_) / 4
                                                        : each;
  }
  return proposals_;
}

Speculation::Outcome Speculation::verify(SequenceDecoder& seq, const float* rows, std::size_t vocab, int64_t max_length,
                                         models::SequenceState& state, int64_t held, double seconds) {
  ++stats_.target_forwards;
  stats_.proposed += proposals_.size();
  step_seconds_ = step_seconds_ > 0 ? step_seconds_ + (seconds - step_seconds_) / 4 : seconds;
  if (draft_forward_seconds_ > 0) proposer_.set_cost_ratio(draft_forward_seconds_ / step_seconds_);
  // Drawn proposals (a sampling draft) are verified by speculative sampling's rule, fixed ones by replay.
  const std::span<const std::vector<double>> q = proposer_.distributions();
  const bool rule = !q.empty() && q.size() == proposals_.size();
  Outcome out;
  for (std::size_t i = 0; i <= proposals_.size(); ++i) {
    const std::span<const float> row(rows + i * vocab, vocab);
    std::optional<TokenId> tok;
    bool agreed = false;
    if (rule && i < proposals_.size()) {
      seq.distribution(row, p_);
      const SpeculativeDraw d = speculative_sample(p_, q[i], proposals_[i], seq.rng());
      tok = seq.take(d.token, row);
      agreed = d.accepted;
    } else {
      tok = seq.accept(row);
      agreed = tok && i < proposals_.size() && *tok == proposals_[i];  // the next row was computed after it
    }
    if (!tok) break;
    if (seq.length() >= max_length) {  // the context is full
      seq.stop_early(StopReason::MaxLength);
      break;
    }
    if (agreed) {
      ++out.kept;
      continue;
    }
    out.next = *tok;
    break;
  }
  stats_.accepted += out.kept;
  if (!out.next) return out;  // stopped: nothing to roll back for
  // A step that ran the draft counts as proposing even when nothing came (a draft not confident enough): its draft
  // forward is paid all the same, and the gate pauses asking when that does not pay.
  gate_.record(asked_, seconds + propose_seconds_, out.kept + 1);
  const int64_t stands = held + 1 + static_cast<int64_t>(out.kept);  // the token taken, then the kept proposals
  state.crop(stands);
  proposer_.keep(stands);
  if (!proposals_.empty()) k_ = out.kept == proposals_.size() ? std::min(most_, k_ + 2) : std::max<int64_t>(1, k_ - 1);
  return out;
}

SpeculativeStats Speculation::stats() const {
  SpeculativeStats s = stats_;
  s.draft_forwards = proposer_.draft_forwards();
  return s;
}

}  // namespace ferry::text::detail
