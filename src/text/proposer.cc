// Prompt lookup and draft-model proposers (proposer.h).
#include "proposer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "ferry/core/error.h"

namespace ferry::text::detail {

std::vector<TokenId> PromptLookup::propose(std::span<const TokenId> tokens, int64_t k) {
  const auto size = static_cast<int64_t>(tokens.size());
  if (k <= 0) return {};
  for (int64_t n = std::min(max_ngram_, size - 1); n >= 1; --n) {
    const auto suffix = tokens.subspan(static_cast<std::size_t>(size - n));
    // The latest occurrence that ends before the suffix starts over it and has a continuation.
    for (int64_t j = size - n - 1; j >= 0; --j) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + j)) continue;
      const int64_t from = j + n, to = std::min(size, from + k);
      return {tokens.begin() + from, tokens.begin() + to};
    }
  }
  return {};
}

}  // namespace ferry::text::detail

namespace ferry::text {

void check_draft_model(const models::LanguageModel& draft, const models::LanguageModel& target) {
  const auto& d = draft.model_info();
  const auto& t = target.model_info();
  const std::string names = "the model (" + t.architecture + ", " + std::to_string(t.vocab_size) +
                            " tokens) and the draft model (" + d.architecture + ", " + std::to_string(d.vocab_size) +
                            " tokens)";
  if (d.vocab_size != t.vocab_size)
    throw Error(ErrorKind::InvalidValue, "the draft model's vocabulary differs from the model's: " + names,
                "speculative decoding", "use a draft model with the same tokenizer (a smaller model of the family)");
  if (d.is_encoder_decoder != t.is_encoder_decoder)
    throw Error(ErrorKind::InvalidValue,
                std::string("the draft model is ") + (d.is_encoder_decoder ? "an encoder-decoder" : "decoder-only") +
                    " and the model is not: " + names,
                "speculative decoding", "use a draft model of the same kind");
}

}  // namespace ferry::text

namespace ferry::text::detail {
namespace {

// softmax(v)[best] for the largest logit `best`: 1 / sum of exp(v_i - v_best).
double top_probability(const std::vector<float>& v, TokenId best) {
  const double max = v[static_cast<std::size_t>(best)];
  double total = 0;
  for (float x : v) total += std::exp(static_cast<double>(x) - max);
  return 1.0 / total;
}

}  // namespace

DraftModel::DraftModel(models::LanguageModel& draft, const models::LanguageModel& target,
                       std::span<const int64_t> prompt, DType kv_dtype, std::optional<SamplingOptions> sampling,
                       double confidence)
    : draft_(draft), confidence_(confidence) {
  check_draft_model(draft, target);
  if (sampling && sampling->do_sample) {
    sampling->seed ^= 0x9e3779b97f4a7c15ULL;  // a stream of its own, not the model's draws again
    sampler_.emplace(*sampling);
  }
  state_ = draft_.start_sequence(prompt, kv_dtype).state;
}

std::vector<TokenId> DraftModel::propose(std::span<const TokenId> tokens, int64_t k) {
  std::vector<TokenId> out;
  distributions_.clear();
  // The draft holds tokens.size() + k - 1 tokens after k proposals: within its context.
  k = std::min<int64_t>(k, draft_.context_length() - static_cast<int64_t>(tokens.size()) + 1);
  if (k <= 0) return out;
  // Feed what the draft has not seen (at least the token the model takes next), then its own tokens one at a time.
  std::vector<int64_t> input(tokens.begin() + fed_, tokens.end());
  models::StepRow row{state_, 0};
  double all_kept = 1.0;  // the chance every proposal so far is kept, by the draft's own top probabilities
  auto unsure = [&](double top) {
    all_kept *= top;
    return confidence_ >= 0 ? top < confidence_ : all_kept < cost_ratio_;
  };
  // A sampling draft's repetition penalty sees the tokens so far and its own proposals.
  std::vector<TokenId> previous;
  if (sampler_) previous.assign(tokens.begin(), tokens.end());
  for (int64_t i = 0; i < k; ++i) {
    row.tokens = static_cast<int64_t>(input.size());
    const Tensor logits = draft_.forward_step(Tensor::from_vector(input, {row.tokens}), {&row, 1}, 1).to(Device::cpu());
    ++forwards_;
    fed_ += row.tokens;
    const std::vector<float> v = logits.to_vector<float>();
    TokenId next = 0;
    if (sampler_) {  // a draw from what the draft's sampler would draw from
      std::vector<double>& q = distributions_.emplace_back();
      sampler_->distribution(v, previous, q);
      if (unsure(*std::max_element(q.begin(), q.end()))) {  // decided before the draw: proposals stay draws from q
        distributions_.pop_back();
        break;
      }
      next = sample_weights(q, sampler_->rng());
      previous.push_back(next);
    } else {
      next = static_cast<TokenId>(std::max_element(v.begin(), v.end()) - v.begin());
      if (confidence_ != 0 && unsure(top_probability(v, next))) break;
    }
    out.push_back(next);
    input.assign(1, next);
  }
  return out;
}

void DraftModel::keep(int64_t length) {
  if (length >= fed_) return;
  state_->crop(length);
  fed_ = length;
}

}  // namespace ferry::text::detail
