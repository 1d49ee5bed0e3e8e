// Stop criteria for generation: end-of-sequence ids, stop strings and max_new_tokens, plus the text
// bookkeeping a streaming caller needs so it never shows the beginning of a stop string it will later cut.
//
// Hugging Face: transformers' StoppingCriteria (MaxLengthCriteria via max_new_tokens,
// EosTokenCriteria, StopStringCriteria). Deliberate difference: HF leaves the stop string in the
// generated text; StopChecker withholds it (and anything after it in the same chunk), which is what a
// chat or completion user expects. The ids still include the token that completed it.
//
// Example (inside a decode loop):
//   ferry::text::StopChecker stop({.eos_token_ids = {128009}, .stop_strings = {"\nUser:"}, .max_new_tokens = 256});
//   ferry::text::DecodeStream stream(tokenizer, /*skip_special_tokens=*/true);
//   while (!stop.stopped()) {
//     TokenId id = sampler.sample(logits, ids);
//     auto step = stop.push(id, stream.step(id).value_or(""));
//     std::cout << step.text;                                    // safe to show now
//   }
//   std::cout << stop.finish(stream.finish()).text;               // what the decoder still held
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/text/tokenizer.h"  // TokenId

namespace ferry::text {

struct StopCriteria {
  std::vector<TokenId> eos_token_ids;     ///< any of these ends generation (HF: eos_token_id)
  std::vector<std::string> stop_strings;  ///< generated text containing one of these ends generation
  std::size_t max_new_tokens = 256;       ///< generation ends after this many tokens (HF: max_new_tokens)
  /// Prompt + generated tokens (an encoder-decoder model's decoder tokens) a sequence may hold, below the model's
  /// context; 0: the model's context. Reaching it stops with MaxLength. HF: max_length; the CLI's --context.
  std::size_t max_length = 0;
};

/// Why generation ended. MaxLength: the model's context (max_position_embeddings) or StopCriteria::max_length is full; Cancelled: the caller
/// stopped it (a token callback returned false, or BatchGenerator::cancel).
enum class StopReason { None, EosToken, StopString, MaxNewTokens, MaxLength, Cancelled };

/// "none", "eos_token", "stop_string", "max_new_tokens", "max_length" or "cancelled".
const char* to_string(StopReason reason);

/// Tracks one generation against StopCriteria. Not thread-safe: one per generation.
class StopChecker {
 public:
  /// Throws ferry::Error for an empty stop string.
  explicit StopChecker(StopCriteria criteria);

  struct Step {
    StopReason reason = StopReason::None;  ///< None while generation should go on
    std::string text;                      ///< text now safe to show (may be empty)
  };

  /// Records a generated token and the text it completed (DecodeStream output, "" if none). Text that
  /// could be the start of a stop string is held back until it is known not to be one; an EOS token's
  /// own text is never shown. Throws ferry::Error when called after generation stopped.
  Step push(TokenId id, std::string_view new_text);

  /// Ends the text: `tail` is what the decoder still held (DecodeStream::finish()). Returns the text now
  /// safe to show, which is everything still withheld plus `tail`, cut at a stop string found in them
  /// (reason() becomes StopString when generation had not stopped yet). Nothing after a stop string that
  /// already matched is shown. May be called once generation stopped, or to end it early.
  Step finish(std::string_view tail);

  /// True when `id` is one of the criteria's end-of-sequence ids (its text is never shown).
  bool is_eos(TokenId id) const;

  bool stopped() const { return reason_ != StopReason::None; }
  StopReason reason() const { return reason_; }
  /// The stop string that matched (empty unless reason() == StopString).
  const std::string& matched_stop_string() const { return matched_; }
  std::size_t generated_tokens() const { return generated_; }

 private:
  std::string release_all();
  std::optional<std::string> cut_at_stop_string();

  StopCriteria criteria_;
  StopReason reason_ = StopReason::None;
  std::string held_;  // shown text withheld because it may begin a stop string
  std::string matched_;
  std::size_t generated_ = 0;
};

}  // namespace ferry::text
