// Sampling (see ferry/text/sampling.h): HF generate()'s logits processors and the categorical draw.
#include "ferry/text/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "ferry/core/error.h"

namespace ferry::text {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void check_no_nan(std::span<const float> logits, const char* where) {
  for (float v : logits) {
    if (std::isnan(v)) throw Error("logits contain NaN", where, "check the model's output");
  }
}

// Finite entries of `logits` sorted best first: larger logit first, lower id first among equals.
std::vector<std::int32_t> ranked(std::span<const float> logits) {
  std::vector<std::int32_t> order;
  order.reserve(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] != kNegInf) order.push_back(static_cast<std::int32_t>(i));
  }
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  return order;
}

}  // namespace

void apply_repetition_penalty(std::span<float> logits, std::span<const TokenId> previous, float penalty) {
  if (!(penalty > 0.0f)) throw Error("repetition_penalty must be > 0, got " + std::to_string(penalty), "sampling");
  if (penalty == 1.0f) return;
  std::vector<bool> seen(logits.size(), false);
  for (const TokenId id : previous) {
    if (id < 0 || static_cast<std::size_t>(id) >= logits.size()) {
      throw Error("token id " + std::to_string(id) + " is outside the logits (vocabulary of " +
                      std::to_string(logits.size()) + ")",
                  "repetition penalty", "are the ids from the same model?");
    }
    if (seen[static_cast<std::size_t>(id)]) continue;  // HF gathers the original score once per id
    seen[static_cast<std::size_t>(id)] = true;
    float& v = logits[static_cast<std::size_t>(id)];
    v = v < 0.0f ? v * penalty : v / penalty;
  }
}

void apply_temperature(std::span<float> logits, float temperature) {
  if (!(temperature > 0.0f) || std::isinf(temperature)) {
    throw Error("temperature must be a positive finite number, got " + std::to_string(temperature), "sampling",
                "for deterministic decoding use do_sample=false (greedy)");
  }
  for (float& v : logits) v /= temperature;
}

void apply_top_k(std::span<float> logits, std::size_t k) {
  if (k == 0) throw Error("top_k must be >= 1 (0 means disabled: do not call apply_top_k)", "sampling");
  if (k >= logits.size()) return;
  std::vector<float> values(logits.begin(), logits.end());
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k - 1), values.end(),
                   std::greater<float>());
  const float kth = values[k - 1];
  for (float& v : logits) {
    if (v < kth) v = kNegInf;
  }
}

void softmax(std::span<const float> logits, std::vector<double>& probs) {
  probs.assign(logits.size(), 0.0);
  float max = kNegInf;
  for (float v : logits) max = std::max(max, v);
  if (max == kNegInf) return;
  double total = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    probs[i] = logits[i] == kNegInf ? 0.0 : std::exp(static_cast<double>(logits[i]) - max);
    total += probs[i];
  }
  for (double& p : probs) p /= total;
}

void apply_top_p(std::span<float> logits, float top_p) {
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    throw Error("top_p must lie in (0, 1], got " + std::to_string(top_p), "sampling");
  }
  if (top_p == 1.0f) return;
  std::vector<double> probs;
  softmax(logits, probs);
  // HF removes a token when the ascending cumulative probability up to and including it is <= 1 - top_p,
  // i.e. when the mass ranked above it already reaches top_p.
  double above = 0.0;
  for (const std::int32_t i : ranked(logits)) {
    if (above >= static_cast<double>(top_p)) logits[i] = kNegInf;
    above += probs[i];
  }
}

void apply_min_p(std::span<float> logits, float min_p) {
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    throw Error("min_p must lie in [0, 1], got " + std::to_string(min_p), "sampling");
  }
  if (min_p == 0.0f || logits.empty()) return;
  const TokenId best = argmax(logits);
  const float max = logits[best];
  if (max == kNegInf) return;
  // p_i < min_p * p_max  <=>  exp(l_i - l_max) < min_p
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (static_cast<TokenId>(i) != best && std::exp(static_cast<double>(logits[i]) - max) < min_p) logits[i] = kNegInf;
  }
}

TokenId argmax(std::span<const float> logits) {
  if (logits.empty()) throw Error("cannot pick a token from empty logits", "sampling");
  check_no_nan(logits, "argmax");
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<TokenId>(best);
}

TokenId sample_categorical(std::span<const float> logits, Rng& rng) {
  check_no_nan(logits, "sampling");
  float max = kNegInf;
  for (float v : logits) max = std::max(max, v);
  if (max == kNegInf) throw Error("every token was filtered out (all logits are -inf)", "sampling");
  if (std::isinf(max)) throw Error("logits contain +inf", "sampling", "check the model's output");
  std::vector<double> weights(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i)
    weights[i] = logits[i] == kNegInf ? 0.0 : std::exp(static_cast<double>(logits[i]) - max);
  return sample_weights(weights, rng);
}

TokenId sample_weights(std::span<const double> weights, Rng& rng) {
  double total = 0.0;
  for (double w : weights) {
    if (!(w >= 0.0)) throw Error("a sampling weight is negative or NaN", "sampling");
    total += w;
  }
  if (!(total > 0.0) || std::isinf(total)) throw Error("no token has a positive (finite) weight", "sampling");
  const double target = rng.uniform() * total;
  double cumulative = 0.0;
  std::size_t last_positive = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] == 0.0) continue;
    cumulative += weights[i];
    last_positive = i;
    if (target < cumulative) return static_cast<TokenId>(i);
  }
  return static_cast<TokenId>(last_positive);  // rounding left `target` at the very end
}

Sampler::Sampler(SamplingOptions options) : options_(options), rng_(options.seed) {
  const auto& o = options_;
  if (!(o.repetition_penalty > 0.0f) || std::isinf(o.repetition_penalty)) {
    throw Error("repetition_penalty must be a positive number, got " + std::to_string(o.repetition_penalty),
                "SamplingOptions.repetition_penalty", "1.0 disables it");
  }
  if (o.do_sample && (!(o.temperature > 0.0f) || std::isinf(o.temperature))) {
    throw Error("temperature must be a positive finite number when sampling, got " + std::to_string(o.temperature),
                "SamplingOptions.temperature", "for deterministic decoding set do_sample=false (greedy)");
  }
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) {
    throw Error("top_p must lie in (0, 1], got " + std::to_string(o.top_p), "SamplingOptions.top_p", "1.0 disables it");
  }
  if (!(o.min_p >= 0.0f && o.min_p <= 1.0f)) {
    throw Error("min_p must lie in [0, 1], got " + std::to_string(o.min_p), "SamplingOptions.min_p", "0 disables it");
  }
}

std::span<float> Sampler::processed(std::span<const float> logits, std::span<const TokenId> previous) {
  const auto& o = options_;
  scratch_.assign(logits.begin(), logits.end());
  const std::span<float> s(scratch_);
  apply_repetition_penalty(s, previous, o.repetition_penalty);
  if (!o.do_sample) return s;
  check_no_nan(s, "sampling");
  if (o.temperature != 1.0f) apply_temperature(s, o.temperature);
  if (o.top_k != 0) apply_top_k(s, o.top_k);
  if (o.top_p < 1.0f) apply_top_p(s, o.top_p);
  if (o.min_p > 0.0f) apply_min_p(s, o.min_p);
  return s;
}

TokenId Sampler::sample(std::span<const float> logits, std::span<const TokenId> previous) {
  const auto& o = options_;
  if (!o.do_sample && (o.repetition_penalty == 1.0f || previous.empty())) return argmax(logits);
  const std::span<float> s = processed(logits, previous);
  return o.do_sample ? sample_categorical(s, rng_) : argmax(s);
}

void Sampler::distribution(std::span<const float> logits, std::span<const TokenId> previous,
                           std::vector<double>& probs) {
  const std::span<float> s = processed(logits, previous);
  if (options_.do_sample) {
    softmax(s, probs);
    return;
  }
  probs.assign(logits.size(), 0.0);
  probs[static_cast<std::size_t>(argmax(s))] = 1.0;
}

}  // namespace ferry::text
