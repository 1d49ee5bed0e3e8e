// The GPT-2 byte-to-unicode table shared by the ByteLevel normalizer, pre-tokenizer and decoder: each of
// the 256 byte values is shown as a printable character (printable Latin-1 bytes as themselves, the rest
// as U+0100 + n), so byte-level BPE can work on text. Hugging Face: pre_tokenizers/byte_level.rs
// bytes_char(); OpenAI gpt-2 encoder.py bytes_to_unicode().
#pragma once

#include <string>
#include <string_view>

namespace ferry::text::detail {

/// UTF-8 spelling of the character that stands for byte `b`.
const std::string& byte_level_char(unsigned char b);

/// Appends the byte-level spelling of every byte of `text` to `out`.
void byte_level_encode(std::string_view text, std::string& out);

/// The byte that code point `cp` stands for, or -1 when `cp` is not in the table.
int byte_level_byte(char32_t cp);

}  // namespace ferry::text::detail
