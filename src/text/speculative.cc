// The speculative generate loop (include/ferry/text/speculative.h): generate() hands one sequence here when a
// proposer is set. Each step feeds the model the token it takes next and the proposals after it in one forward,
// then gives the rows to the sequence's decoder one by one — plain decoding's sampler on the logits plain decoding
// would have computed — while the sampled token equals the proposal the next row was computed after (replay); or,
// for proposals a draft drew from its distribution, while speculative sampling's rule keeps them.
#include "speculative_generate.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "ferry/core/error.h"
#include "proposer.h"
#include "sequence_decoder.h"
#include "speculation.h"

namespace ferry::text::detail {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Tensor ids_tensor(const std::vector<int64_t>& ids) {
  return Tensor::from_vector(ids, {static_cast<int64_t>(ids.size())});
}

// Prompt lookup first; the draft model where lookup has no guess.
class Proposers final : public Proposer {
 public:
  Proposers(models::LanguageModel& model, const std::vector<int64_t>& prompt, const GenerateOptions& options) {
    const SpeculativeOptions& spec = options.speculative;
    if (spec.lookup_tokens > 0) lookup_ = std::make_unique<PromptLookup>(std::max<int64_t>(1, spec.lookup_max_ngram));
    if (spec.draft)
      draft_ = std::make_unique<DraftModel>(*spec.draft, model, prompt, options.kv_cache_dtype,
                                            spec.draft_sample ? std::optional(options.sampling) : std::nullopt,
                                            spec.draft_confidence);
  }
  std::vector<TokenId> propose(std::span<const TokenId> tokens, int64_t k) override {
    from_draft_ = false;
    if (lookup_) {
      auto out = lookup_->propose(tokens, k);
      if (!out.empty() || !draft_) return out;
    }
    from_draft_ = true;
    return draft_->propose(tokens, k);
  }
  std::span<const std::vector<double>> distributions() const override {
    return from_draft_ ? draft_->distributions() : std::span<const std::vector<double>>{};
  }
  void keep(int64_t length) override {
    if (draft_) draft_->keep(length);
  }
  std::size_t draft_forwards() const override { return draft_ ? draft_->draft_forwards() : 0; }
  void set_cost_ratio(double ratio) override {
    if (draft_) draft_->set_cost_ratio(ratio);
  }

 private:
  std::unique_ptr<PromptLookup> lookup_;
  std::unique_ptr<DraftModel> draft_;
  bool from_draft_ = false;  // the last proposals are the draft's
};

}  // namespace

std::unique_ptr<Proposer> make_proposer(models::LanguageModel& model, const std::vector<int64_t>& prompt,
                                        const GenerateOptions& options) {
  return std::make_unique<Proposers>(model, prompt, options);
}

GenerateResult speculative_generate(models::LanguageModel& model, const Tokenizer* tokenizer,
                                    const std::vector<int64_t>& prompt, int64_t max_length,
                                    const GenerateOptions& options, const TokenCallback& on_token, Proposer& proposers,
                                    int64_t most) {
  Speculation spec(proposers, most);
  auto t0 = Clock::now();
  models::SequenceStart start = model.start_sequence(prompt, options.kv_cache_dtype);
  const std::vector<TokenId> first_input(start.input.begin(), start.input.end());
  SequenceDecoder seq(tokenizer, first_input, options, on_token);
  models::StepRow row{start.state, static_cast<int64_t>(first_input.size())};
  std::vector<float> first =
      model.forward_step(ids_tensor(start.input), {&row, 1}, 1).to(Device::cpu()).to_vector<float>();
  seq.result().timings.prefill_seconds = seconds_since(t0);

  auto t_decode = Clock::now();
  // The token the model takes next (a plain TokenId, as GCC 12 misreads a std::optional here).
  const std::optional<TokenId> first_token = options.stop.max_new_tokens > 0 ? seq.accept(first) : std::nullopt;
  bool more = first_token.has_value();
  TokenId next = more ? *first_token : 0;
  while (more) {
    if (seq.length() >= max_length) {  // as generate(): the context is full
      seq.stop_early(StopReason::MaxLength);
      break;
    }
    const int64_t held = row.state->length();
    const std::vector<TokenId>& proposals = spec.propose(seq, max_length - seq.length());
    std::vector<int64_t> input{next};
    input.insert(input.end(), proposals.begin(), proposals.end());
    row.tokens = static_cast<int64_t>(input.size());
    const auto t_step = Clock::now();
    const Tensor rows = model.forward_step(ids_tensor(input), {&row, 1}, row.tokens).to(Device::cpu());
    const std::vector<float> logits = rows.to_vector<float>();
    const Speculation::Outcome out = spec.verify(seq, logits.data(), static_cast<std::size_t>(rows.size(1)), max_length,
                                                 *row.state, held, seconds_since(t_step));
    more = out.next.has_value();
    if (more) next = *out.next;
  }
  GenerateResult& result = seq.finish();
  result.timings.decode_seconds = seconds_since(t_decode);
  result.speculative = spec.stats();
  return std::move(result);
}

}  // namespace ferry::text::detail
