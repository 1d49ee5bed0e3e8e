// SequenceDecoder: what happens to one sequence after each forward — sample the next token from its logits row,
// stream the text it completes, check the stop criteria, call the caller's callback — shared by generate() (one
// sequence) and BatchGenerator (many), so a sequence gives the same tokens and text whichever runs it.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "ferry/text/generate.h"

namespace ferry::text::detail {

class SequenceDecoder {
 public:
  /// Validates the options (throws ferry::Error for bad sampling settings or an empty stop string).
  SequenceDecoder(const Tokenizer* tokenizer, std::span<const TokenId> prompt_ids, const GenerateOptions& options,
                  TokenCallback on_token);

  /// Samples from the logits of the sequence's last position, records the token and its text, and calls the
  /// callback. Returns the token when generation goes on (the next forward's input), nullopt when it stopped.
  std::optional<TokenId> accept(std::span<const float> logits_row);
  /// As accept(), with the token chosen by the caller (speculative sampling's rule) instead of the sampler;
  /// `logits_row` is only recorded (GenerateOptions::record_logits).
  std::optional<TokenId> take(TokenId next, std::span<const float> logits_row);
  /// The distribution accept() would draw this row's token from (the sampler's processors over the ids so far).
  void distribution(std::span<const float> logits_row, std::vector<double>& probs) {
    sampler_.distribution(logits_row, all_, probs);
  }
  /// The sampler's random stream (speculative sampling draws from it too).
  Rng& rng() noexcept { return sampler_.rng(); }
  /// Ends generation early with `reason` (the context is full, the caller cancelled); a no-op once stopped.
  void stop_early(StopReason reason);
  /// Flushes the text the decoder still held and fills in the stop reason; call once, after the last accept().
  GenerateResult& finish();

  GenerateResult& result() noexcept { return result_; }
  /// Prompt plus generated tokens.
  int64_t length() const noexcept { return static_cast<int64_t>(all_.size()); }
  /// Those tokens (the decoder's: an encoder-decoder model's start token, then the generated ones).
  std::span<const TokenId> tokens() const noexcept { return all_; }

 private:
  const GenerateOptions& options_;
  TokenCallback on_token_;
  Sampler sampler_;
  StopChecker stop_;
  std::optional<DecodeStream> stream_;
  std::vector<TokenId> all_;
  GenerateResult result_;
  std::optional<StopReason> early_;
  std::size_t step_ = 0;
};

}  // namespace ferry::text::detail
