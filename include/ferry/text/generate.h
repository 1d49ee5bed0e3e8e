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

#include "ferry/models/causal_lm.h"
#include "ferry/models/seq2seq_lm.h"
#include "ferry/text/sampling.h"
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

/// Throws ferry::Error for an empty prompt, an id outside the model's vocabulary, or a prompt that fills the
/// context (no room for one generated token).
void check_prompt(const models::CausalLM& model, std::span<const TokenId> prompt_ids);
/// For an encoder-decoder model: a non-empty prompt of ids inside the vocabulary (no context limit).
void check_prompt(const models::Seq2SeqLM& model, std::span<const TokenId> prompt_ids);
/// The most tokens (prompt + generated) a sequence may hold: max_position_embeddings (unlimited when unknown).
/// Generation stops there with StopReason::MaxLength, as transformers' max_length does.
int64_t context_length(const models::CausalLM& model);

/// Generates from token ids. `tokenizer` may be null: then no text is produced (ids only) and stop strings
/// cannot match. Throws ferry::Error for a prompt check_prompt() refuses.
GenerateResult generate(models::CausalLM& model, const Tokenizer* tokenizer, std::span<const TokenId> prompt_ids,
                        const GenerateOptions& options = {}, const TokenCallback& on_token = {});

/// Encoder-decoder generation (T5): the encoder runs once over prompt_ids, then the decoder starts from
/// decoder_start_token_id and generates one token per forward with its KV cache and the cached cross-attention keys
/// and values. Sampling, stop criteria and callbacks as above (a repetition penalty sees the decoder's tokens, as
/// in transformers); GenerateResult::prompt_ids are the encoder's input; timings: prefill = encoder + first decoder
/// step. HF: AutoModelForSeq2SeqLM.generate(input_ids, ...)
GenerateResult generate(models::Seq2SeqLM& model, const Tokenizer* tokenizer, std::span<const TokenId> prompt_ids,
                        const GenerateOptions& options = {}, const TokenCallback& on_token = {});
GenerateResult generate(models::Seq2SeqLM& model, const Tokenizer& tokenizer, std::string_view prompt,
                        const GenerateOptions& options = {}, const TokenCallback& on_token = {});

/// Encodes `prompt` with the tokenizer, then generates.
GenerateResult generate(models::CausalLM& model, const Tokenizer& tokenizer, std::string_view prompt,
                        const GenerateOptions& options = {}, const TokenCallback& on_token = {});

}  // namespace ferry::text
