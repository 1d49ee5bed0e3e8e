// Unit tests of the tokenizer's Unicode helpers and the Oniguruma-compatible Regex.
#include <gtest/gtest.h>

#include "ferry/core/error.h"
#include "text/regex.h"
#include "text/unicode.h"

namespace ferry::text::detail {
namespace {

using Spans = std::vector<std::pair<std::size_t, std::size_t>>;

Spans find_all(const Regex& r, std::string_view text) {
  Spans out;
  r.find_all(text, out);
  return out;
}

std::vector<std::string> pieces(const Regex& r, std::string_view text) {
  std::vector<std::string> out;
  for (auto [b, e] : find_all(r, text)) out.emplace_back(text.substr(b, e - b));
  return out;
}

TEST(Utf8Repair, MaximalSubpartsBecomeOneReplacementEach) {
  const std::string R(kReplacementChar);
  struct Case {
    std::string in, want;
  };
  const Case cases[] = {
      {"plain", "plain"},
      {"\xFF", R},
      {"abc\xC3", "abc" + R},                 // truncated 2-byte sequence
      {"\xE2\x82", R},                        // truncated 3-byte: one replacement for both bytes
      {"\xE2\x82" "A", R + "A"},
      {"\xED\xA0\x80", R + R + R},            // UTF-16 surrogate: E D is not followed by A0
      {"\xF4\x90\x80\x80", R + R + R + R},    // above U+10FFFF
      {"\xC0\xAF", R + R},                    // overlong
      {"\x80\x80", R + R},                    // stray continuation bytes
      {"ok\xF0\x9F\x98" "end", "ok" + R + "end"},
      {"\xE2\x82\xAC\xE2\x82", "\xE2\x82\xAC" + R},
      {std::string("a\0b", 3), std::string("a\0b", 3)},
  };
  for (const Case& c : cases) EXPECT_EQ(to_valid_utf8(c.in), c.want) << c.in;
  EXPECT_TRUE(is_valid_utf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xC3"));
}

TEST(Unicode, CharacterClassesFollowRust) {
  for (std::uint32_t c : {0x09, 0x0A, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F, 0x3000}) {
    EXPECT_TRUE(is_whitespace(c)) << std::hex << c;
  }
  for (std::uint32_t c : {0x1C, 0x1F, 0x180E, 0x200B, 0xFEFF, 0x61}) EXPECT_FALSE(is_whitespace(c)) << std::hex << c;
  for (std::uint32_t c : {0x37, 0xB2, 0xBD, 0x2460, 0x216B, 0x663}) EXPECT_TRUE(is_numeric(c)) << std::hex << c;
  EXPECT_FALSE(is_numeric('x'));
  EXPECT_TRUE(is_combining_mark(0x301));
  EXPECT_FALSE(is_combining_mark('e'));
}

TEST(Unicode, LowercaseUsesFullMappingPerCharacter) {
  EXPECT_EQ(lowercase("HeLLo ÀÉ"), "hello àé");
  EXPECT_EQ(lowercase("\xC4\xB0"), "i\xCC\x87");  // İ -> i + combining dot above
  EXPECT_EQ(lowercase("ΣΑΣ"), "σασ");              // per character: no final sigma
}

TEST(Unicode, NormalFormsViaUtf8proc) {
  EXPECT_EQ(normalize("e\xCC\x81", NormalForm::NFC), "\xC3\xA9");
  EXPECT_EQ(normalize("\xC3\xA9", NormalForm::NFD), "e\xCC\x81");
  EXPECT_EQ(normalize("\xEF\xAC\x81", NormalForm::NFKC), "fi");      // ﬁ ligature
  EXPECT_EQ(normalize("\xEF\xBC\xA8", NormalForm::NFKC), "H");       // fullwidth H
  EXPECT_EQ(normalize("\xEF\xAC\x81", NormalForm::NFC), "\xEF\xAC\x81");
  EXPECT_EQ(normalize(std::string("a\0b", 3), NormalForm::NFC), std::string("a\0b", 3));
}

TEST(OnigTranslation, RewritesClassesWhoseMeaningDiffers) {
  EXPECT_EQ(onig_to_pcre2("\\s+", "t"), "\\p{White_Space}+");
  EXPECT_EQ(onig_to_pcre2("[^\\s\\p{L}]", "t"), "[^\\p{White_Space}\\p{L}]");
  EXPECT_EQ(onig_to_pcre2("\\u00e9", "t"), "\\x{00e9}");
  EXPECT_EQ(onig_to_pcre2("(?mi:a.b)", "t"), "(?si:a.b)");
  EXPECT_EQ(onig_to_pcre2("[]a]", "t"), "[]a]");
  EXPECT_THROW(onig_to_pcre2("[a-z&&[^aeiou]]", "t"), Error);
  // Nested classes are unions (Oniguruma), spliced into the outer class; a negated one cannot be.
  EXPECT_EQ(onig_to_pcre2("[^(\\s|[.,!?])]", "t"), "[^(\\p{White_Space}|.,!?)]");
  EXPECT_EQ(onig_to_pcre2("[a[b[c]]d]x", "t"), "[abcd]x");
  EXPECT_EQ(onig_to_pcre2("[a[]b]]", "t"), "[a]b]");
  EXPECT_THROW(onig_to_pcre2("[a[^b]]", "t"), Error);
  const Regex bloom(" ?[^(\\s|[.,!?…。，、।۔،])]+", "bloom");
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  bloom.find_all("Hi, you (there)!? a|b", spans);  // "(", ")", "|" are in the class too, as Oniguruma reads it
  EXPECT_EQ(spans, (std::vector<std::pair<std::size_t, std::size_t>>{{0, 2}, {3, 7}, {9, 14}, {17, 19}, {20, 21}}));
  EXPECT_THROW(onig_to_pcre2("[\\W]", "t"), Error);
}

TEST(OnigRegex, WordClassMatchesOniguruma) {
  const Regex w("\\w", "t");
  // Oniguruma counts ² ³ ¹ ¼ ½ ¾ (Latin-1 ctype table) and marks, but not ZWJ or circled digits.
  for (const char* yes : {"a", "_", "\xC2\xB2", "\xC2\xBD", "\xCC\x81", "\xE0\xA4\xBC", "\xE2\x85\xAB", "\xD9\xA1"}) {
    EXPECT_TRUE(w.search(yes)) << yes;
  }
  for (const char* no : {"-", " ", "\xE2\x80\x8D", "\xE2\x91\xA0"}) EXPECT_FALSE(w.search(no)) << no;
  const Regex s("\\s", "t");
  EXPECT_TRUE(s.search("\xC2\x85"));      // NEL is White_Space
  EXPECT_FALSE(s.search("\xE2\x80\x8B"));  // ZERO WIDTH SPACE is not
}

TEST(OnigRegex, EmptyMatchesFollowTheOnigCrate) {
  // An empty match right after a non-empty one is dropped; otherwise empty matches advance one char.
  EXPECT_EQ(find_all(Regex("a*", "t"), "baaac"), (Spans{{0, 0}, {1, 4}, {5, 5}}));
  EXPECT_EQ(find_all(Regex("", "t"), "ab"), (Spans{{0, 0}, {1, 1}, {2, 2}}));
  EXPECT_EQ(find_all(Regex("x*", "t"), "\xC3\xA9"), (Spans{{0, 0}, {2, 2}}));  // advances a whole character
}

TEST(OnigRegex, Gpt2PatternSplitsLikeGpt2) {
  const Regex gpt2(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", "t");
  EXPECT_EQ(pieces(gpt2, "Hello world's  12 fish!!\n"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " 12", " fish", "!!", "\n"}));
}

TEST(OnigRegex, CaseInsensitiveGroupsFoldLikeOniguruma) {
  const Regex r("(?i:'s|'t)", "t");
  EXPECT_TRUE(r.search("'S"));
  EXPECT_TRUE(r.search("'\xC5\xBF"));  // ſ folds to s
  EXPECT_FALSE(r.search("'x"));
}

TEST(OnigRegex, LiteralEscapingMatchesExactly) {
  const Regex r(escape_literal("a.b*(c)\t"), "t");
  EXPECT_TRUE(r.search("xa.b*(c)\ty"));
  EXPECT_FALSE(r.search("aXbb(c)\t"));
}

TEST(OnigRegex, InvalidPatternNamesTheField) {
  try {
    Regex("(unclosed", "tokenizer.json: pre_tokenizer.pattern");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pre_tokenizer.pattern"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ferry::text::detail
