// The generate loop (see include/ferry/text/generate.h): one sequence, one forward per token; what is done with
// each logits row is SequenceDecoder's (shared with BatchGenerator).
#include "ferry/text/generate.h"

#include <chrono>
#include <cstdint>

#include "ferry/core/error.h"
#include "ferry/models/kv_cache.h"
#include "sequence_decoder.h"

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

// A prompt of at least one id, every id in [0, vocab).
void check_ids(std::span<const TokenId> prompt_ids, int64_t vocab) {
  if (prompt_ids.empty()) throw Error("the prompt is empty", "generate", "give at least one token (e.g. BOS)");
  for (TokenId id : prompt_ids)
    if (id < 0 || id >= vocab)
      throw Error("prompt token id " + std::to_string(id) + " is outside the vocabulary (size " +
                      std::to_string(vocab) + ")",
                  "generate");
}

}  // namespace

void check_prompt(const models::CausalLM& model, std::span<const TokenId> prompt_ids) {
  check_ids(prompt_ids, model.info().vocab_size);
  const int64_t context = context_length(model);
  if (static_cast<int64_t>(prompt_ids.size()) >= context)
    throw Error("the prompt has " + std::to_string(prompt_ids.size()) + " tokens but the model's context is " +
                    std::to_string(context) + ", leaving no room to generate",
                "generate", "shorten the prompt");
}

void check_prompt(const models::Seq2SeqLM& model, std::span<const TokenId> prompt_ids) {
  check_ids(prompt_ids, model.info().vocab_size);
}

int64_t context_length(const models::CausalLM& model) {
  const int64_t n = model.info().max_position_embeddings;
  return n > 0 ? n : INT64_MAX;
}

GenerateResult generate(models::CausalLM& model, const Tokenizer* tokenizer, std::span<const TokenId> prompt_ids,
                        const GenerateOptions& options, const TokenCallback& on_token) {
  check_prompt(model, prompt_ids);
  detail::SequenceDecoder seq(tokenizer, prompt_ids, options, on_token);
  auto cache = model.make_cache(options.kv_cache_dtype);

  // Prefill: the whole prompt in one forward, logits of the last position only.
  auto t0 = Clock::now();
  Tensor logits = model.logits(token_ids_tensor(prompt_ids), cache, 1);
  seq.result().timings.prefill_seconds = seconds_since(t0);

  auto t_decode = Clock::now();
  while (options.stop.max_new_tokens > 0) {
    const std::optional<TokenId> next = seq.accept(logits.to(Device::cpu()).to_vector<float>());
    if (!next) break;
    if (seq.length() >= context_length(model)) {
      seq.stop_early(StopReason::MaxLength);
      break;
    }
    const TokenId one[] = {*next};
    logits = model.logits(token_ids_tensor(one), cache, 1);
  }
  GenerateResult& result = seq.finish();
  result.timings.decode_seconds = seconds_since(t_decode);
  return std::move(result);
}

GenerateResult generate(models::Seq2SeqLM& model, const Tokenizer* tokenizer, std::span<const TokenId> prompt_ids,
                        const GenerateOptions& options, const TokenCallback& on_token) {
  check_prompt(model, prompt_ids);
  const TokenId start = static_cast<TokenId>(model.info().decoder_start_token_id);
  const TokenId first[] = {start};
  detail::SequenceDecoder seq(tokenizer, first, options, on_token);
  auto cache = model.make_cache();

  auto t0 = Clock::now();
  const Tensor encoder_out = model.encode(token_ids_tensor(prompt_ids));
  Tensor logits = model.decode(token_ids_tensor(first), encoder_out, cache, 1);
  seq.result().timings.prefill_seconds = seconds_since(t0);

  auto t_decode = Clock::now();
  while (options.stop.max_new_tokens > 0) {
    const std::optional<TokenId> next = seq.accept(logits.to(Device::cpu()).to_vector<float>());
    if (!next) break;
    const TokenId one[] = {*next};
    logits = model.decode(token_ids_tensor(one), encoder_out, cache, 1);
  }
  GenerateResult& result = seq.finish();
  result.timings.decode_seconds = seconds_since(t_decode);
  result.prompt_ids.assign(prompt_ids.begin(), prompt_ids.end());
  result.timings.prompt_tokens = prompt_ids.size();
  return std::move(result);
}

GenerateResult generate(models::Seq2SeqLM& model, const Tokenizer& tokenizer, std::string_view prompt,
                        const GenerateOptions& options, const TokenCallback& on_token) {
  std::vector<TokenId> ids = tokenizer.encode(prompt, options.add_special_tokens);
  return generate(model, &tokenizer, ids, options, on_token);
}

GenerateResult generate(models::CausalLM& model, const Tokenizer& tokenizer, std::string_view prompt,
                        const GenerateOptions& options, const TokenCallback& on_token) {
  std::vector<TokenId> ids = tokenizer.encode(prompt, options.add_special_tokens);
  return generate(model, &tokenizer, ids, options, on_token);
}

}  // namespace ferry::text
