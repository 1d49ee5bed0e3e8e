// Sampling: choosing the next token from a model's logits, the way Hugging Face generate() does.
//
// Hugging Face: transformers.GenerationConfig (do_sample, temperature, top_k, top_p, min_p,
// repetition_penalty) and the logits processors generate() builds from it, applied in generate()'s
// order: RepetitionPenaltyLogitsProcessor, then (only when sampling) TemperatureLogitsWarper,
// TopKLogitsWarper, TopPLogitsWarper, MinPLogitsWarper, then argmax (greedy) or a categorical draw.
// Each processor is also a free function over a span of logits, for callers that compose their own.
//
// Randomness: Rng is std::mt19937_64 seeded with SamplingOptions::seed; a uniform draw is the top 53 bits
// of one 64-bit output scaled to [0, 1), and a token is drawn by inverting the cumulative distribution
// in vocabulary order. The same seed, logits and options therefore give the same tokens on every
// platform (torch's RNG is not reproduced: seeds are not interchangeable with PyTorch's).
//
// Ties: greedy picks the lowest id among equal maxima (torch.argmax does too); top-k keeps every token
// tied with the k-th largest logit (HF's `scores < kth_value` test); top-p ranks equal logits by id,
// lower id first.
//
// Example:
//   ferry::text::Sampler sampler({.do_sample = true, .temperature = 0.7f, .top_p = 0.9f, .seed = 42});
//   TokenId next = sampler.sample(logits_row, ids_so_far);
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "ferry/text/tokenizer.h"  // TokenId

namespace ferry::text {

/// Decoding options; defaults are GenerationConfig's (greedy; top_k 50 applies only when sampling).
struct SamplingOptions {
  bool do_sample = false;           ///< false: greedy argmax; true: draw from the processed distribution
  float temperature = 1.0f;         ///< > 0; logits are divided by it (only when sampling)
  std::size_t top_k = 50;           ///< keep the k highest logits; 0 disables (only when sampling)
  float top_p = 1.0f;               ///< in (0, 1]: keep the smallest set of top tokens with mass >= top_p
  float min_p = 0.0f;               ///< in [0, 1]: drop tokens whose probability < min_p * the top one's
  float repetition_penalty = 1.0f;  ///< > 0; 1 disables (applies to greedy decoding too)
  std::uint64_t seed = 0;           ///< seeds the Rng
};

/// The seedable generator of the sampler (see the file comment for the exact definition).
class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) : engine_(seed) {}
  /// A uniform double in [0, 1) from the top 53 bits of one engine output.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

/// Hugging Face: RepetitionPenaltyLogitsProcessor. For each distinct id in `previous` (prompt and
/// generated ids), a positive logit is divided by `penalty` and a negative one multiplied by it.
/// Throws ferry::Error for an id outside the logits or a penalty <= 0.
void apply_repetition_penalty(std::span<float> logits, std::span<const TokenId> previous, float penalty);

/// Hugging Face: TemperatureLogitsWarper. Divides every logit by `temperature` (> 0).
void apply_temperature(std::span<float> logits, float temperature);

/// Hugging Face: TopKLogitsWarper. Sets every logit below the k-th largest to -infinity (k >= vocab:
/// no change; k == 0 is not allowed).
void apply_top_k(std::span<float> logits, std::size_t k);

/// Hugging Face: TopPLogitsWarper. Keeps the highest-probability tokens whose cumulative probability
/// reaches `top_p` (always at least one); the rest become -infinity.
void apply_top_p(std::span<float> logits, float top_p);

/// Hugging Face: MinPLogitsWarper. Drops tokens whose probability is below min_p times the most likely
/// token's (always keeps that one).
void apply_min_p(std::span<float> logits, float min_p);

/// Index of the largest logit, the lowest index among ties. Throws ferry::Error on an empty span or NaN.
TokenId argmax(std::span<const float> logits);

/// Draws an index from softmax(logits) (entries at -infinity have probability 0).
/// Throws ferry::Error when no entry is finite or one is NaN.
TokenId sample_categorical(std::span<const float> logits, Rng& rng);

/// Softmax in double precision (max-subtracted), written to `probs` (resized).
void softmax(std::span<const float> logits, std::vector<double>& probs);

/// Draws an index with probability proportional to `weights` (non-negative; zero ones are never drawn), inverting
/// the cumulative sum in index order with one rng.uniform(). Throws ferry::Error when no weight is positive or one is
/// negative or NaN.
TokenId sample_weights(std::span<const double> weights, Rng& rng);

/// One position of speculative sampling: `proposal` was drawn from the draft's distribution `q`; `p` is the model's.
/// Kept with probability min(1, p(x) / q(x)) (one rng.uniform()); otherwise the token is drawn from max(0, p - q)
/// normalised (one more). The token returned is distributed as p. Throws ferry::Error when p and q differ in size or
/// the proposal lies outside them.
struct SpeculativeDraw {
  TokenId token = 0;
  bool accepted = false;  ///< token is the proposal, kept
};
SpeculativeDraw speculative_sample(std::span<const double> p, std::span<const double> q, TokenId proposal, Rng& rng);

/// Applies SamplingOptions to logit rows and picks tokens; owns the Rng, so successive calls continue one
/// random stream. Not thread-safe: one per generation.
class Sampler {
 public:
  /// Validates the options (throws ferry::Error naming the bad field) and seeds the Rng.
  explicit Sampler(SamplingOptions options = {});

  /// The next token for one row of logits [vocab]. `previous`: the ids so far (prompt + generated),
  /// used by the repetition penalty. `logits` is not modified.
  TokenId sample(std::span<const float> logits, std::span<const TokenId> previous = {});
  /// The distribution sample() draws from for this row, written to `probs` (resized to the vocabulary): the
  /// processors applied, then softmax; greedy decoding gives 1 at its argmax. Draws nothing from the Rng.
  void distribution(std::span<const float> logits, std::span<const TokenId> previous, std::vector<double>& probs);

  const SamplingOptions& options() const { return options_; }
  Rng& rng() { return rng_; }

 private:
  // The row after the processors sample() applies (the repetition penalty; the warpers when sampling), in scratch_.
  std::span<float> processed(std::span<const float> logits, std::span<const TokenId> previous);

  SamplingOptions options_;
  Rng rng_;
  std::vector<float> scratch_;
};

}  // namespace ferry::text
