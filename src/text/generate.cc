// The generate loop (see include/ferry/text/generate.h).
#include "ferry/text/generate.h"

#include <chrono>

#include "ferry/core/error.h"
#include "ferry/models/kv_cache.h"

namespace ferry::text {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

Tensor token_ids_tensor(std::span<const TokenId> ids) {
  std::vector<int64_t> v(ids.begin(), ids.end());
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
}

GenerateResult generate(models::CausalLM& model, const Tokenizer* tokenizer, std::span<const TokenId> prompt_ids,
                        const GenerateOptions& options, const TokenCallback& on_token) {
  if (prompt_ids.empty()) throw Error("the prompt is empty", "generate", "give at least one token (e.g. BOS)");
  const int64_t vocab = model.info().vocab_size;
  for (TokenId id : prompt_ids)
    if (id < 0 || id >= vocab)
      throw Error("prompt token id " + std::to_string(id) + " is outside the vocabulary (size " +
                      std::to_string(vocab) + ")",
                  "generate");

  GenerateResult result;
  result.prompt_ids.assign(prompt_ids.begin(), prompt_ids.end());
  std::vector<TokenId> all(prompt_ids.begin(), prompt_ids.end());
  Sampler sampler(options.sampling);
  StopChecker stop(options.stop);
  std::optional<DecodeStream> stream;
  if (tokenizer) stream.emplace(*tokenizer, options.skip_special_tokens);
  auto cache = model.make_cache(options.kv_cache_dtype);

  // Prefill: the whole prompt in one forward, logits of the last position only.
  auto t0 = Clock::now();
  Tensor logits = model.logits(token_ids_tensor(prompt_ids), cache, 1);
  result.timings.prefill_seconds = seconds_since(t0);
  result.timings.prompt_tokens = prompt_ids.size();

  auto t_decode = Clock::now();
  for (std::size_t step = 0; options.stop.max_new_tokens > 0; ++step) {
    std::vector<float> row = logits.to(Device::cpu()).to_vector<float>();
    if (step < options.record_logits) result.step_logits.push_back(row);
    const TokenId next = sampler.sample(row, all);
    all.push_back(next);
    result.generated_ids.push_back(next);
    // An EOS token's text is never shown, so the stream does not see it (its held text is flushed below).
    std::string piece = stream && !stop.is_eos(next) ? stream->step(next).value_or("") : std::string();
    auto s = stop.push(next, piece);
    result.text += s.text;
    bool go_on = !stop.stopped();
    if (on_token && !on_token(s.text, next)) go_on = false;
    if (!go_on) break;
    const TokenId one[] = {next};
    logits = model.logits(token_ids_tensor(one), cache, 1);
  }
  if (stream) {  // text the decoder still held: a byte run or an incomplete UTF-8 sequence at the end
    auto tail = stop.finish(stream->finish());
    result.text += tail.text;
    if (on_token && !tail.text.empty()) on_token(tail.text, kEndOfText);
  }
  result.timings.decode_seconds = seconds_since(t_decode);
  result.timings.generated_tokens = result.generated_ids.size();
  result.stop_reason = stop.reason();
  return result;
}

GenerateResult generate(models::CausalLM& model, const Tokenizer& tokenizer, std::string_view prompt,
                        const GenerateOptions& options, const TokenCallback& on_token) {
  std::vector<TokenId> ids = tokenizer.encode(prompt, options.add_special_tokens);
  return generate(model, &tokenizer, ids, options, on_token);
}

}  // namespace ferry::text
