// The GPT-2 byte-to-unicode table (see byte_level.h).
#include "text/byte_level.h"

#include <array>

#include "text/unicode.h"

namespace ferry::text::detail {
namespace {

struct Table {
  std::array<std::string, 256> chars;
  std::array<int, 512> bytes;  // code point (< 512) -> byte, or -1
  Table() {
    bytes.fill(-1);
    std::array<char32_t, 256> cp{};
    std::array<bool, 256> printable{};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    char32_t n = 0;
    for (int b = 0; b < 256; ++b) cp[b] = printable[b] ? static_cast<char32_t>(b) : 256 + n++;
    for (int b = 0; b < 256; ++b) {
      append_utf8(chars[b], cp[b]);
      bytes[cp[b]] = b;
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

const std::string& byte_level_char(unsigned char b) { return table().chars[b]; }

void byte_level_encode(std::string_view text, std::string& out) {
  const Table& t = table();
  out.reserve(out.size() + text.size() * 2);
  for (char c : text) out += t.chars[static_cast<unsigned char>(c)];
}

int byte_level_byte(char32_t cp) { return cp < 512 ? table().bytes[cp] : -1; }

}  // namespace ferry::text::detail
