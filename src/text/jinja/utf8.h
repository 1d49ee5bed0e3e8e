// UTF-8 helpers for the Jinja engine: Python strings count code points, so length, indexing, slicing, title() and
// the like work on decoded text. Invalid bytes (templates are untrusted) survive a round trip as the lone
// surrogates U+DC80..U+DCFF, as Python's surrogateescape does.
#pragma once

#include <cstddef>
#include <string>

namespace ferry::text::jinja {

std::u32string utf8_decode(const std::string& s);
void utf8_append(std::string& out, char32_t c);
std::string utf8_encode(const std::u32string& s);
std::size_t utf8_length(const std::string& s);
/// Python's str.isspace() for a code point.
bool is_space(char32_t c);

}  // namespace ferry::text::jinja
