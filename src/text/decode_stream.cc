// DecodeStream (see ferry/text/tokenizer.h). HF's step_decode_stream, made total:
//   - the window [window_, end) is decoded at each step; [window_, context_end_) is context whose decode
//     `prefix_` was already emitted; the new suffix of the decode is emitted and the window slides;
//   - `end` stops before a trailing run of byte-fallback pieces (and of ids decode() drops, which a run goes on
//     across), whose decode is not final until the run ends; text ending in U+FFFD (an incomplete UTF-8
//     sequence) is held as in HF;
//   - where HF raises (the window's decode no longer starts with the prefix) the stream instead decodes
//     everything since start_ at each step and emits only extensions of what it emitted.
// finish() emits the rest of decode(everything since start_).
#include <algorithm>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/text/tokenizer.h"
#include "text/unicode.h"

namespace ferry::text {
namespace {

bool ends_with_replacement(const std::string& s) {
  return s.size() >= detail::kReplacementChar.size() &&
         s.compare(s.size() - detail::kReplacementChar.size(), std::string::npos, detail::kReplacementChar) == 0;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// The token strings the ByteFallback decoder turns into bytes: "<0xNN>" (and "<0x+N>", which Rust's
// u8::from_str_radix also accepts).
bool is_byte_piece(const std::optional<std::string>& piece) {
  if (!piece || piece->size() != 6 || piece->compare(0, 3, "<0x") != 0 || (*piece)[5] != '>') return false;
  return ((*piece)[3] == '+' || is_hex((*piece)[3])) && is_hex((*piece)[4]);
}

}  // namespace

DecodeStream::DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string DecodeStream::decode(std::size_t begin, std::size_t end) const {
  return tokenizer_->decode(std::span<const TokenId>(ids_).subspan(begin, end - begin), skip_special_tokens_);
}

// Ids after the last one that ends a byte run are pending: byte pieces, and ids decode() drops (unknown ids, and
// special tokens when they are skipped), since a run goes on across those.
std::size_t DecodeStream::settled_end(std::size_t floor) const {
  std::size_t end = ids_.size();
  while (end > floor && kind_[end - 1] != Kind::Text) --end;
  return end;
}

std::string DecodeStream::emit(std::string text) {
  emitted_ += text;
  return text;
}

std::optional<std::string> DecodeStream::step(TokenId id) {
  // HF: while no context text exists, settled pending ids that decode to nothing (skipped special tokens)
  // become context.
  if (!full_ && prefix_.empty() && context_end_ < ids_.size()) {
    const std::size_t end = settled_end(context_end_);
    if (end > context_end_ && decode(window_, end).empty()) context_end_ = end;
  }
  ids_.push_back(id);
  const std::optional<std::string> piece = tokenizer_->id_to_token(id);
  kind_.push_back(is_byte_piece(piece)                                                    ? Kind::Byte
                  : !piece || (skip_special_tokens_ && tokenizer_->is_special(id)) ? Kind::Dropped
                                                                                          : Kind::Text);
  return full_ ? step_full() : step_window();
}

std::optional<std::string> DecodeStream::step_window() {
  const std::size_t end = settled_end(context_end_);
  if (end <= context_end_) return std::nullopt;
  const std::string text = decode(window_, end);
  if (text.size() <= prefix_.size() || ends_with_replacement(text)) return std::nullopt;
  if (!starts_with(text, prefix_)) {
    log_debug("DecodeStream: the decoder is not prefix-stable here; decoding every id from now on");
    full_ = true;
    return step_full();
  }
  std::string new_text = text.substr(prefix_.size());
  window_ = context_end_;
  context_end_ = end;
  prefix_ = decode(window_, context_end_);
  return emit(std::move(new_text));
}

std::optional<std::string> DecodeStream::step_full() {
  const std::size_t end = settled_end(start_);
  if (end <= start_) return std::nullopt;
  const std::string text = decode(start_, end);
  const std::string_view done = std::string_view(emitted_).substr(emitted_at_start_);
  if (text.size() <= done.size() || ends_with_replacement(text) || !starts_with(text, done)) return std::nullopt;
  return emit(text.substr(done.size()));
}

std::string DecodeStream::finish() {
  const std::string text = decode(start_, ids_.size());
  const std::string_view done = std::string_view(emitted_).substr(emitted_at_start_);
  std::size_t common = 0;
  while (common < done.size() && common < text.size() && done[common] == text[common]) ++common;
  if (common < done.size())
    log_warning("DecodeStream: the streamed text differs from the final decode after byte {}; sending the rest",
                emitted_at_start_ + common);
  std::string rest = text.substr(common);
  emit(rest);
  start_ = window_ = context_end_ = ids_.size();
  prefix_.clear();
  emitted_at_start_ = emitted_.size();
  full_ = false;
  return rest;
}

}  // namespace ferry::text
