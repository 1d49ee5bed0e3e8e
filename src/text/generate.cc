// The generate loop (see include/ferry/text/generate.h): one sequence, one forward per token; what is done with
// each logits row is SequenceDecoder's (shared with BatchGenerator).
#include "ferry/text/generate.h"

#include <chrono>
#include <algorithm>
#include <climits>
#include <cstdint>

#include "ferry/core/error.h"
#include "ferry/models/kv_cache.h"
#include "sequence_decoder.h"
#include "speculative_generate.h"

namespace ferry::text {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

Tensor token_ids_tensor(std::span<const TokenId> ids) {
  std::vector<int64_t> v(ids.begin(), ids.end());
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
}

namespace {

std::vector<int64_t> ids64(std::span<const TokenId> ids) { return {ids.begin(), ids.end()}; }

Tensor ids_tensor(const std::vector<int64_t>& ids) {
  return Tensor::from_vector(ids, {static_cast<int64_t>(ids.size())});
}

}  // namespace

int64_t sequence_max_length(const models::LanguageModel& model, std::span<const TokenId> prompt_ids,
                            const GenerateOptions& options) {
  const std::vector<int64_t> prompt = ids64(prompt_ids);
  model.check_prompt(prompt);
  const auto n = static_cast<int64_t>(prompt.size());
  int64_t max_length =
      model.max_length(n, static_cast<int64_t>(std::min<std::size_t>(options.stop.max_new_tokens, INT64_MAX / 2)));
  if (options.stop.max_length > 0) {
    const auto cap = static_cast<int64_t>(std::min<std::size_t>(options.stop.max_length, INT64_MAX / 2));
    const int64_t first = static_cast<int64_t>(model.first_input(prompt).size());
    if (first >= cap)
      throw Error("the prompt has " + std::to_string(n) + " tokens but a sequence may hold " + std::to_string(cap) +
                      ", leaving no room to generate",
                  "generate", "shorten the prompt or raise the context (max_length, --context)");
    max_length = std::min(max_length, cap);
  }
  return max_length;
}

GenerateResult generate(models::LanguageModel& model, const Tokenizer* tokenizer, std::span<const TokenId> prompt_ids,
                        const GenerateOptions& options, const TokenCallback& on_token) {
  const std::vector<int64_t> prompt = ids64(prompt_ids);
  const int64_t max_length = sequence_max_length(model, prompt_ids, options);
  if (options.speculative.enabled()) {
    auto proposer = detail::make_proposer(model, prompt, options);
    GenerateResult result = detail::speculative_generate(model, tokenizer, prompt, max_length, options, on_token,
                                                         *proposer, detail::proposals_per_step(options.speculative));
    result.prompt_ids.assign(prompt_ids.begin(), prompt_ids.end());
    result.timings.prompt_tokens = prompt_ids.size();
    return result;
  }

  // Prefill: the prompt (an encoder-decoder model: the encoder, then its start token) in one forward, logits of the
  // last position only.
  auto t0 = Clock::now();
  models::SequenceStart start = model.start_sequence(prompt, options.kv_cache_dtype);
  const std::vector<TokenId> first(start.input.begin(), start.input.end());
  detail::SequenceDecoder seq(tokenizer, first, options, on_token);
  models::StepRow row{start.state, static_cast<int64_t>(first.size())};
  Tensor logits = model.forward_step(ids_tensor(start.input), {&row, 1}, 1);
  seq.result().timings.prefill_seconds = seconds_since(t0);

  auto t_decode = Clock::now();
  while (options.stop.max_new_tokens > 0) {
    const std::optional<TokenId> next = seq.accept(logits.to(Device::cpu()).to_vector<float>());
    if (!next) break;
    if (seq.length() >= max_length) {  // max_new_tokens is the stop checker's: here the context is full
      seq.stop_early(StopReason::MaxLength);
      break;
    }
    row.tokens = 1;
    logits = model.forward_step(ids_tensor({*next}), {&row, 1}, 1);
  }
  GenerateResult& result = seq.finish();
  result.timings.decode_seconds = seconds_since(t_decode);
  result.prompt_ids.assign(prompt_ids.begin(), prompt_ids.end());  // an encoder-decoder's decoder saw its start token
  result.timings.prompt_tokens = prompt_ids.size();
  return std::move(result);
}

GenerateResult generate(models::LanguageModel& model, const Tokenizer& tokenizer, std::string_view prompt,
                        const GenerateOptions& options, const TokenCallback& on_token) {
  std::vector<TokenId> ids = tokenizer.encode(prompt, options.add_special_tokens);
  return generate(model, &tokenizer, ids, options, on_token);
}

}  // namespace ferry::text
