// SequenceDecoder (see sequence_decoder.h).
#include "sequence_decoder.h"

namespace ferry::text::detail {

SequenceDecoder::SequenceDecoder(const Tokenizer* tokenizer, std::span<const TokenId> prompt_ids,
                                 const GenerateOptions& options, TokenCallback on_token)
    : options_(options),
      on_token_(std::move(on_token)),
      sampler_(options.sampling),
      stop_(options.stop),
      all_(prompt_ids.begin(), prompt_ids.end()) {
  if (tokenizer) stream_.emplace(*tokenizer, options.skip_special_tokens);
  result_.prompt_ids.assign(prompt_ids.begin(), prompt_ids.end());
  result_.timings.prompt_tokens = prompt_ids.size();
}

std::optional<TokenId> SequenceDecoder::accept(std::span<const float> row) {
  if (early_ || stop_.stopped()) return std::nullopt;
  return take(sampler_.sample(row, all_), row);
}

std::optional<TokenId> SequenceDecoder::take(TokenId next, std::span<const float> row) {
  if (early_ || stop_.stopped()) return std::nullopt;
  if (step_++ < options_.record_logits) result_.step_logits.emplace_back(row.begin(), row.end());
  all_.push_back(next);
  result_.generated_ids.push_back(next);
  // An EOS token's text is never shown, so the stream does not see it (its held text is flushed in finish()).
  std::string piece = stream_ && !stop_.is_eos(next) ? stream_->step(next).value_or("") : std::string();
  auto s = stop_.push(next, piece);
  result_.text += s.text;
  bool go_on = !stop_.stopped();
  if (on_token_ && !on_token_(s.text, next)) {
    go_on = false;
    if (!stop_.stopped()) early_ = StopReason::Cancelled;
  }
  return go_on ? std::optional<TokenId>(next) : std::nullopt;
}

void SequenceDecoder::stop_early(StopReason reason) {
  if (!early_ && !stop_.stopped()) early_ = reason;
}

GenerateResult& SequenceDecoder::finish() {
  if (stream_) {  // text the decoder still held: a byte run or an incomplete UTF-8 sequence at the end
    auto tail = stop_.finish(stream_->finish());
    result_.text += tail.text;
    if (on_token_ && !tail.text.empty()) on_token_(tail.text, kEndOfText);
  }
  result_.timings.generated_tokens = result_.generated_ids.size();
  result_.stop_reason = stop_.stopped() ? stop_.reason() : early_.value_or(stop_.reason());
  return result_;
}

}  // namespace ferry::text::detail
