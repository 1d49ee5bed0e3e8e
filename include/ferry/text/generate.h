// generate: prompt in, text out — prefill the whole prompt in one forward, then decode one token at a time with
// the KV cache, sampling each next token and streaming text as soon as it is complete UTF-8. Works on any
// device map: the model's hooks do the ferrying, generate only calls the model.
//
// Hugging Face: GenerationMixin.generate(input_ids, max_new_tokens, do_sample, temperature, top_k, top_p, min_p,
// repetition_penalty, eos_token_id, stop_strings) with a TextStreamer.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/models/language_model.h"
#include "ferry/text/sampling.h"
#include "ferry/text/speculative.h"
#include "ferry/text/stopping.h"
#include "ferry/text/tokenizer.h"

namespace ferry::text {

struct GenerateOptions {
  SamplingOptions sampling;
  StopCriteria stop;                 // eos ids, stop strings, max_new_tokens
  bool add_special_tokens = true;    // when encoding a text prompt (BOS)
  bool skip_special_tokens = true;   // when decoding the output
  DType kv_cache_dtype = DType::F32;
  /// Keep the logits of the last position for the first N steps (step 0 = after prefill).
  std::size_t record_logits = 0;
  /// Speculative decoding (speculative.h): off unless a proposer is set.
  SpeculativeOptions speculative;
};

struct GenerateTimings {
  double prefill_seconds = 0, decode_seconds = 0;
  std::size_t prompt_tokens = 0, generated_tokens = 0;
  /// Prompt tokens per second of the prefill forward.
  double prefill_tokens_per_second() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0; }
  /// Tokens per second of the decode steps (the first generated token comes from the prefill).
  double decode_tokens_per_second() const {
    return decode_seconds > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_seconds : 0;
  }
};

struct GenerateResult {
  std::vector<TokenId> prompt_ids;
  std::vector<TokenId> generated_ids;
  std::string text;          // the generated text as streamed: decode(generated_ids) less an EOS token's text, cut
                             // before a stop string
  StopReason stop_reason = StopReason::None;
  GenerateTimings timings;
  std::vector<std::vector<float>> step_logits;  // record_logits rows of [vocab]
  SpeculativeStats speculative;                 // when options.speculative was enabled
};

/// Called with each piece of text as soon as it is safe to show (may be empty when a token completes no
/// character yet) and the token id. Return false to stop generating (stop reason "cancelled"). After the last token, text the
/// decoder still held back (a byte-fallback run or an incomplete UTF-8 sequence at the end) comes in one
/// more call with id kEndOfText, whose return value is ignored. The pieces together always equal
/// GenerateResult::text.
using TokenCallback = std::function<bool(std::string_view text, TokenId id)>;

/// The id of the TokenCallback call that carries the text held back at the end of generation.
inline constexpr TokenId kEndOfText = -1;

/// Token ids as the [n] int64 tensor CausalLM::logits takes.
Tensor token_ids_tensor(std::span<const TokenId> ids);

/// Checks `prompt_ids` as LanguageModel::check_prompt does, and that they leave room under options.stop.max_length;
/// returns the most tokens the sequence may reach: LanguageModel::max_length, capped by stop.max_length. generate() and
/// BatchGenerator both size a sequence with it.
int64_t sequence_max_length(const models::LanguageModel& model, std::span<const TokenId> prompt_ids,
                            const GenerateOptions& options);

/// Generates from token ids with any language model. `tokenizer` may be null: then no text is produced (ids only)
/// and stop strings cannot match. Throws ferry::Error for a prompt sequence_max_length() refuses.
/// Decoder-only: the prompt is prefilled in one forward, then one token per forward with the KV cache; generation
/// stops at the context (max_position_embeddings) with StopReason::MaxLength, as transformers' max_length does.
/// Encoder-decoder (T5): the encoder runs once over the prompt, then the decoder starts from
/// decoder_start_token_id (a repetition penalty sees the decoder's tokens, as in transformers); timings: prefill =
/// encoder + first decoder step. GenerateResult::prompt_ids are the prompt either way.
/// HF: GenerationMixin.generate(input_ids, ...) of an AutoModelForCausalLM or AutoModelForSeq2SeqLM.
GenerateResult generate(models::LanguageModel& model, const Tokenizer* tokenizer, std::span<const TokenId> prompt_ids,
                        const GenerateOptions& options = {}, const TokenCallback& on_token = {});

/// Encodes `prompt` with the tokenizer, then generates.
GenerateResult generate(models::LanguageModel& model, const Tokenizer& tokenizer, std::string_view prompt,
                        const GenerateOptions& options = {}, const TokenCallback& on_token = {});

}  // namespace ferry::text
