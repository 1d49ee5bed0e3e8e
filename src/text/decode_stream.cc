// DecodeStream (see ferry/text/tokenizer.h): HF's step_decode_stream. The window `ids_` holds a few ids
// of context (before prefix_index_) whose decode `prefix_` was already emitted, followed by pending ids.
// Each step decodes the window; text is final once the decode grew past the prefix and does not end in
// U+FFFD (the sign of an incomplete UTF-8 sequence); the new suffix is emitted and the window slides.
#include "ferry/core/error.h"
#include "ferry/text/tokenizer.h"
#include "text/unicode.h"

namespace ferry::text {
namespace {

bool ends_with_replacement(const std::string& s) {
  return s.size() >= detail::kReplacementChar.size() &&
         s.compare(s.size() - detail::kReplacementChar.size(), std::string::npos, detail::kReplacementChar) == 0;
}

}  // namespace

DecodeStream::DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::optional<std::string> DecodeStream::step(TokenId id) {
  if (prefix_.empty() && !ids_.empty()) {
    std::string new_prefix = tokenizer_->decode(ids_, skip_special_tokens_);
    if (!ends_with_replacement(new_prefix)) {
      prefix_ = std::move(new_prefix);
      prefix_index_ = ids_.size();
    }
  }
  ids_.push_back(id);
  const std::string text = tokenizer_->decode(ids_, skip_special_tokens_);
  if (text.size() <= prefix_.size() || ends_with_replacement(text)) return std::nullopt;
  if (text.compare(0, prefix_.size(), prefix_) != 0) {
    throw Error("decoded text \"" + text + "\" does not start with the text already emitted \"" + prefix_ + "\"",
                "DecodeStream, token id " + std::to_string(id), "this tokenizer's decoder cannot be streamed");
  }
  std::string new_text = text.substr(prefix_.size());
  const std::size_t new_prefix_index = ids_.size() - prefix_index_;
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_index_));
  prefix_ = tokenizer_->decode(ids_, skip_special_tokens_);
  prefix_index_ = new_prefix_index;
  return new_text;
}

}  // namespace ferry::text
