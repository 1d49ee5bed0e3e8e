// Speculative decoding: a proposer guesses the next few tokens, the model checks them all in one forward, and every
// guess it would itself have produced is kept — several tokens per read of the weights, which is what an offloaded
// model's decode is bound by. Proposers: prompt lookup (the continuation of the latest earlier occurrence of the
// last n-gram, in the prompt and the output so far; no second model) and a draft model (a smaller model of the same
// vocabulary, its proposals its greedy tokens).
//
// Verification, when the proposals are fixed tokens (prompt lookup, a greedy draft; and greedy decoding always): by
// replay. The model's logits for the checked positions are handed, row by row, to the same sampler
// plain decoding uses, and proposals are kept while each sampled token equals the proposal after which the next
// row was computed. So the output is plain decoding's, token for token, greedy or sampled with the same seed —
// not only its distribution — as far as the rows of one forward over several tokens equal those of forwards over
// one (bit for bit for bf16 weights on AVX-512 BF16 and AMX CPUs, whose linear kernels are batch invariant; within
// f32 summation order otherwise, which can flip a near-tie). Under sampling a proposal is then kept with the
// probability p(x) the model gives it, and a rejection draws from p without x: the rule below for a draft q that puts
// all its mass on x.
//
// Verification when a draft model samples (sampling, SpeculativeOptions::draft_sample): speculative sampling, the rule
// of Leviathan et al. 2023 ("Fast Inference from Transformers via Speculative Decoding", Algorithm 1) and Chen et al.
// 2023. The draft draws each proposal x from its own processed distribution q (the same sampling options); the model
// keeps it with probability min(1, p(x) / q(x)), p the distribution plain decoding would draw from at that position;
// at the first rejection the token is drawn from max(0, p - q) normalised and the step ends; when every proposal is
// kept, one more token is drawn from p after the last. Each output token is then distributed as p given the tokens
// before it — the model's distribution, whatever the draft — but not equal, draw for draw, to plain decoding's with
// the same seed. A draft close to the model keeps most proposals (1 - the total variation distance between p and q
// per token), where replay keeps only p(x). Rejected positions are rolled back by SequenceState::crop, without
// copying the cache. The rule itself: speculative_sample (sampling.h).
//
// HF: generate(..., assistant_model=draft, prompt_lookup_num_tokens=N); llama.cpp: --model-draft, --draft-max,
// lookup decoding.
#pragma once

#include <cstdint>

#include "ferry/models/language_model.h"

namespace ferry::text {

struct SpeculativeOptions {
  /// Prompt lookup: propose up to this many tokens per step (0: off). HF: prompt_lookup_num_tokens.
  int64_t lookup_tokens = 0;
  /// Prompt lookup: the longest n-gram matched (then shorter ones down to 1). HF: max_matching_ngram_size.
  int64_t lookup_max_ngram = 3;
  /// A draft model (not owned; same vocabulary as the model, checked at the start): proposes its greedy tokens.
  /// HF: assistant_model.
  models::LanguageModel* draft = nullptr;
  /// The most proposals per step. The number adapts: +2 after a step that kept every proposal, -1 after one that did
  /// not, between 1 and this (HF's "heuristic" schedule). llama.cpp: --draft-max.
  int64_t max_proposals = 8;
  /// Under sampling: the draft samples its proposals and they are verified by the rule of speculative sampling
  /// (above; the output's distribution is the model's). false: the draft proposes its greedy tokens, verified by
  /// replay (the output equals plain sampling's with the same seed). HF: the assistant's do_sample.
  bool draft_sample = true;
  /// Where the draft stops proposing within a step. Negative (the default, "auto"): while the chance that every
  /// proposal so far is kept — the product of the draft's top probabilities — stays above what a draft forward costs
  /// against a step of the model (measured as the generation runs): a draft a twelfth of a model in RAM stops where it
  /// is unsure, one in front of a model read from disk proposes far. In [0, 1]: stop at the first position whose top
  /// probability is below it (HF: assistant_confidence_threshold, default 0.4; llama.cpp: --draft-p-min); 0 never
  /// stops early. Top probabilities are the draft's processed distribution when it samples, its softmax otherwise;
  /// the cut depends on the distribution, never on the token drawn, so speculative sampling keeps the model's
  /// distribution.
  double draft_confidence = -1;

  bool enabled() const noexcept { return lookup_tokens > 0 || draft != nullptr; }
};

struct SpeculativeStats {
  std::size_t proposed = 0;         // tokens proposed
  std::size_t accepted = 0;         // of those, kept
  std::size_t target_forwards = 0;  // forwards of the model after the prefill
  std::size_t draft_forwards = 0;   // forwards of the draft model
  double acceptance_rate() const { return proposed > 0 ? double(accepted) / double(proposed) : 0; }
};

/// Throws ferry::Error, naming both models, when `draft` cannot propose for `model`: another vocabulary size, or
/// another kind (decoder-only against encoder-decoder). generate() checks it at the start; callers that load a draft
/// can check it before.
void check_draft_model(const models::LanguageModel& draft, const models::LanguageModel& model);

}  // namespace ferry::text
