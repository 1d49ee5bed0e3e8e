// Proposers of speculative decoding (include/ferry/text/speculative.h): what guesses the next tokens.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "ferry/models/language_model.h"
#include "ferry/text/sampling.h"
#include "ferry/text/speculative.h"
#include "ferry/text/tokenizer.h"

namespace ferry::text::detail {

class Proposer {
 public:
  virtual ~Proposer() = default;
  /// Up to k tokens that may follow `tokens` — the sequence's decoder tokens so far, the one the model takes next
  /// included. Fewer, or none, when it has no guess.
  virtual std::vector<TokenId> propose(std::span<const TokenId> tokens, int64_t k) = 0;
  /// Only the first `length` tokens of the sequence stand (the model rejected what followed).
  virtual void keep(int64_t length) { (void)length; }
  /// The distributions the last proposals were drawn from, one per proposal (a sampling draft), for speculative
  /// sampling's rule; empty when they are fixed tokens (verified by replay).
  virtual std::span<const std::vector<double>> distributions() const { return {}; }
  /// Forwards of a draft model so far (0 without one).
  virtual std::size_t draft_forwards() const { return 0; }
  /// What a draft forward costs against a step of the model, measured (SpeculativeOptions::draft_confidence auto).
  virtual void set_cost_ratio(double ratio) { (void)ratio; }
};

/// Prompt lookup: the tokens that followed the latest earlier occurrence of the sequence's last n tokens, for n from
/// max_ngram down to 1 (HF's PromptLookupCandidateGenerator).
class PromptLookup final : public Proposer {
 public:
  explicit PromptLookup(int64_t max_ngram) : max_ngram_(max_ngram) {}
  std::vector<TokenId> propose(std::span<const TokenId> tokens, int64_t k) override;

 private:
  int64_t max_ngram_;
};

/// A draft model's tokens: its greedy ones, or (given sampling options that sample) draws from its distribution after
/// those options' processors, kept in distributions(). Its sequence state follows the model's: the tokens it has not
/// seen are fed at the next proposal, rejected ones are cropped away.
class DraftModel final : public Proposer {
 public:
  /// Starts the draft's sequence for `prompt` (an encoder-decoder draft runs its encoder now). Throws ferry::Error when
  /// the draft cannot stand in for `target`: another vocabulary size, or another kind (decoder-only against
  /// encoder-decoder). `sampling`: set and do_sample, the draft samples (its own random stream, seeded from the
  /// options' seed). `confidence`: SpeculativeOptions::draft_confidence.
  DraftModel(models::LanguageModel& draft, const models::LanguageModel& target, std::span<const int64_t> prompt,
             DType kv_dtype, std::optional<SamplingOptions> sampling = std::nullopt, double confidence = 0);
  std::vector<TokenId> propose(std::span<const TokenId> tokens, int64_t k) override;
  void keep(int64_t length) override;
  std::span<const std::vector<double>> distributions() const override { return distributions_; }
  std::size_t draft_forwards() const override { return forwards_; }
  void set_cost_ratio(double ratio) override { cost_ratio_ = ratio; }

 private:
  models::LanguageModel& draft_;
  std::optional<Sampler> sampler_;                  // sampling drafts
  std::vector<std::vector<double>> distributions_;  // of the last proposals (sampling drafts)
  double confidence_ = 0;                           // stop below this top probability; < 0: auto
  double cost_ratio_ = 0;                           // auto: stop once the chance all are kept falls below it
  std::shared_ptr<models::SequenceState> state_;
  int64_t fed_ = 0;  // tokens of the sequence the draft's state holds
  std::size_t forwards_ = 0;
};

}  // namespace ferry::text::detail
