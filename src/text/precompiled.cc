// Precompiled (see precompiled.h): base64, SentencePiece's charsmap blob, spm_precompiled's DoubleArray
// search and Precompiled::normalize.
#include "text/precompiled.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "text/unicode.h"

namespace ferry::text::detail {

bool decode_base64(std::string_view text, std::string& out, std::string& why) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  out.clear();
  if (text.size() % 4 != 0) {
    why = "its length, " + std::to_string(text.size()) + ", is not a multiple of 4";
    return false;
  }
  std::size_t pad = 0;
  while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
  const std::size_t symbols = text.size() - pad;
  out.reserve(symbols / 4 * 3 + 2);
  std::uint32_t bits = 0;
  int nbits = 0;
  for (std::size_t i = 0; i < symbols; ++i) {
    const int v = value(text[i]);
    if (v < 0) {
      why = "invalid character at offset " + std::to_string(i);
      return false;
    }
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    nbits += 6;
    if (nbits >= 8) {
      nbits -= 8;
      out.push_back(static_cast<char>((bits >> nbits) & 0xFF));
    }
  }
  if (nbits > 0 && (bits & ((1u << nbits) - 1)) != 0) {
    why = "the last symbol has unused bits set";
    return false;
  }
  return true;
}

namespace {

class Precompiled final : public Normalizer {
 public:
  Precompiled(std::vector<std::uint32_t> trie, std::string normalized, std::string where)
      : trie_(std::move(trie)), normalized_(std::move(normalized)), where_(std::move(where)) {}

  // Always true: HF builds its transformation list so that the first output character takes the alignment of
  // the first input character even when that character maps to nothing.
  bool normalize(std::string& text) const override {
    if (trie_.empty()) return true;
    std::string out;
    out.reserve(text.size());
    for (std::size_t begin = 0; begin < text.size();) {
      const std::size_t end = grapheme_end(text, begin);
      const std::string_view grapheme(text.data() + begin, end - begin);
      begin = end;
      if (grapheme.size() < 6) {
        if (const auto norm = transform(grapheme)) {
          out.append(*norm);
          continue;
        }
      }
      for (std::size_t i = 0; i < grapheme.size();) {
        const std::size_t n = utf8_length(static_cast<unsigned char>(grapheme[i]));
        const std::string_view ch = grapheme.substr(i, n);
        i += n;
        if (const auto norm = transform(ch)) out.append(*norm);
        else out.append(ch);
      }
    }
    text = std::move(out);
    return true;
  }

 private:
  // Darts unit fields, as spm_precompiled reads them.
  static bool has_leaf(std::uint32_t u) { return (u >> 8) & 1; }
  static std::uint32_t value(std::uint32_t u) { return u & 0x7FFFFFFFu; }
  static std::uint32_t label(std::uint32_t u) { return u & 0x800000FFu; }
  static std::size_t offset(std::uint32_t u) { return static_cast<std::size_t>(u >> 10) << ((u & (1u << 9)) >> 6); }

  std::uint32_t unit(std::size_t pos) const {
    if (pos >= trie_.size()) throw Error("precompiled_charsmap is corrupt: its trie points outside itself", where_);
    return trie_[pos];
  }

  // The replacement of the shortest entry that is a prefix of `chunk` (DoubleArray::common_prefix_search's
  // first result), or nullopt.
  std::optional<std::string_view> transform(std::string_view chunk) const {
    std::size_t pos = offset(unit(0));
    for (const char ch : chunk) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == 0) break;
      pos ^= c;
      const std::uint32_t u = unit(pos);
      if (label(u) != c) return std::nullopt;
      pos ^= offset(u);
      if (has_leaf(u)) return replacement(value(unit(pos)));
    }
    return std::nullopt;
  }

  std::string_view replacement(std::size_t index) const {
    const std::string_view all(normalized_);
    if (index > all.size() || (index < all.size() && (static_cast<unsigned char>(all[index]) & 0xC0) == 0x80)) {
      throw Error("precompiled_charsmap is corrupt: an entry's replacement starts outside its strings", where_);
    }
    const std::size_t end = all.find('\0', index);
    return all.substr(index, end == std::string_view::npos ? std::string_view::npos : end - index);
  }

  std::vector<std::uint32_t> trie_;
  std::string normalized_;
  std::string where_;
};

}  // namespace

std::unique_ptr<Normalizer> parse_precompiled(const JsonView& json) {
  const JsonView field = json.at("precompiled_charsmap");
  const std::string text = field.as_string();
  std::string blob, why;
  if (!decode_base64(text, blob, why)) field.fail("precompiled_charsmap is not valid base64: " + why);
  if (blob.empty()) return std::make_unique<Precompiled>(std::vector<std::uint32_t>{}, std::string{}, field.where());
  auto u32_at = [&](std::size_t at) {
    std::uint32_t v = 0;
    for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(blob[at + static_cast<std::size_t>(k)]);
    return v;
  };
  if (blob.size() < 4) field.fail("precompiled_charsmap is truncated: " + std::to_string(blob.size()) + " bytes");
  const std::size_t units = u32_at(0) / 4;
  if (units > (blob.size() - 4) / 4) {
    field.fail("precompiled_charsmap is truncated: its trie claims " + std::to_string(units * 4) + " bytes, " +
               std::to_string(blob.size() - 4) + " follow");
  }
  std::vector<std::uint32_t> trie(units);
  for (std::size_t i = 0; i < units; ++i) trie[i] = u32_at(4 + 4 * i);
  std::string normalized = blob.substr(4 + 4 * units);
  if (!is_valid_utf8(normalized)) field.fail("precompiled_charsmap's replacement strings are not valid UTF-8");
  return std::make_unique<Precompiled>(std::move(trie), std::move(normalized), field.where());
}

}  // namespace ferry::text::detail
