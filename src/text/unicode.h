// Unicode helpers for the tokenizer: UTF-8 decoding/encoding, the lossy UTF-8 repair that Rust's
// String::from_utf8_lossy performs, and the character classes Hugging Face tokenizers relies on (Rust's
// char::is_whitespace / is_numeric / to_lowercase), plus NFC/NFD/NFKC/NFKD through libutf8proc.
//
// Everything here, except to_valid_utf8 and is_valid_utf8, expects valid UTF-8: the tokenizer repairs its
// input once at the API edge, and every later stage only produces valid UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::text::detail {

/// Number of bytes of the UTF-8 sequence that starts with `lead` (valid UTF-8 assumed).
inline std::size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

/// Decodes the code point at s[i] and advances i past it (valid UTF-8 assumed).
char32_t next_code_point(std::string_view s, std::size_t& i);

/// Appends the UTF-8 encoding of `cp` to `out`.
void append_utf8(std::string& out, char32_t cp);

bool is_valid_utf8(std::string_view s);

/// Replaces every maximal invalid subsequence by U+FFFD, exactly as Rust's String::from_utf8_lossy and
/// Python's bytes.decode("utf-8", "replace") do. Returns `s` unchanged when it is valid.
std::string to_valid_utf8(std::string_view s);

/// Rust's char::is_whitespace: the Unicode White_Space property.
bool is_whitespace(char32_t cp);

/// Rust's char::is_numeric: general categories Nd, Nl and No.
bool is_numeric(char32_t cp);

/// General category Mark (Mn, Mc, Me), the test behind the StripAccents normalizer.
bool is_combining_mark(char32_t cp);

/// Rust's str::to_lowercase for each character (full mapping: U+0130 becomes "i̇").
std::string lowercase(std::string_view s);

/// End of the extended grapheme cluster (UAX #29, through libutf8proc) that starts at s[begin]; Rust's
/// unicode-segmentation `graphemes(true)` cuts text the same way, up to the Unicode versions' differences.
std::size_t grapheme_end(std::string_view s, std::size_t begin);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalize(std::string_view s, NormalForm form);

/// The U+FFFD replacement character in UTF-8.
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

}  // namespace ferry::text::detail
