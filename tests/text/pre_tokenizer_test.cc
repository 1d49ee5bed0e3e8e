// Unit tests of normalizers and pre-tokenizers, built from their tokenizer.json form. Expected splits are
// those of Hugging Face tokenizers' own unit tests (pre_tokenizers/*.rs) where it has one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ferry/core/error.h"

#include "text/normalizer.h"
#include "text/pre_tokenizer.h"

namespace ferry::text::detail {
namespace {

using nlohmann::json;

std::string normalize(const json& spec, std::string text) {
  const auto n = parse_normalizer(JsonView(spec, "test"));
  n->normalize(text);
  return text;
}

std::vector<std::string> pre_tokenize(const json& spec, const std::string& text, std::size_t original_start = 0) {
  const auto p = parse_pre_tokenizer(JsonView(spec, "test"));
  std::vector<Piece> pieces(1);
  pieces[0].text = text;
  pieces[0].original_start = original_start;
  p->pre_tokenize(pieces);
  std::vector<std::string> out;
  for (const Piece& q : pieces) out.push_back(q.text);
  return out;
}

using Strings = std::vector<std::string>;

TEST(Normalizers, EachTypeRewritesAsHuggingFaceDoes) {
  EXPECT_EQ(normalize({{"type", "NFC"}}, "e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(normalize({{"type", "NFKD"}}, "\xEF\xAC\x81"), "fi");
  EXPECT_EQ(normalize({{"type", "Lowercase"}}, "ABC Déjà"), "abc déjà");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, " \t x \n"), "x \n");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, "\xE3\x80\x80 x \xC2\xA0"), "x");
  EXPECT_EQ(normalize({{"type", "StripAccents"}}, "e\xCC\x81t\xCC\x88"), "et");
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}, "hi"), "\xE2\x96\x81hi");
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}, ""), "");
  EXPECT_EQ(normalize({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "_"}}, "a b  c"), "a_b__c");
  EXPECT_EQ(normalize({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}}, "a b    c"), "a b c");
  EXPECT_EQ(normalize({{"type", "ByteLevel"}}, "a \xC3\xA9"), "a\xC4\xA0\xC3\x83\xC2\xA9");
  const json llama2 = {{"type", "Sequence"},
                       {"normalizers", {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                                        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}};
  EXPECT_EQ(normalize(llama2, "Hey you"), "\xE2\x96\x81Hey\xE2\x96\x81you");
}

TEST(PreTokenizers, SplitBehaviours) {
  // tokenizers/src/pre_tokenizers/split.rs, test "basic": "How are you doing?" split on " ".
  auto split = [](const char* behavior, bool invert = false) {
    return json{{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", behavior}, {"invert", invert}};
  };
  const std::string s = "How are you doing?";
  EXPECT_EQ(pre_tokenize(split("Removed"), s), (Strings{"How", "are", "you", "doing?"}));
  EXPECT_EQ(pre_tokenize(split("Isolated"), s), (Strings{"How", " ", "are", " ", "you", " ", "doing?"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithPrevious"), s), (Strings{"How ", "are ", "you ", "doing?"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithNext"), s), (Strings{"How", " are", " you", " doing?"}));
  EXPECT_EQ(pre_tokenize(split("Contiguous"), "a  b"), (Strings{"a", "  ", "b"}));
  EXPECT_EQ(pre_tokenize(split("Removed", true), s), (Strings{" ", " ", " "}));
  const json digits_regex = {{"type", "Split"}, {"pattern", {{"Regex", "\\d+"}}}, {"behavior", "Contiguous"}, {"invert", false}};
  EXPECT_EQ(pre_tokenize(digits_regex, "ab12cd345"), (Strings{"ab", "12", "cd", "345"}));
}

TEST(PreTokenizers, ByteLevelMapsBytesAndSplitsWithTheGpt2Regex) {
  const json bl = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  // pre_tokenizers/byte_level.rs, test "pre_tokenization".
  EXPECT_EQ(pre_tokenize(bl, "Hello my friend, how is your day going?"),
            (Strings{"Hello", "\xC4\xA0my", "\xC4\xA0" "friend", ",", "\xC4\xA0how", "\xC4\xA0is", "\xC4\xA0your",
                     "\xC4\xA0" "day", "\xC4\xA0going", "?"}));
  json prefixed = bl;
  prefixed["add_prefix_space"] = true;
  EXPECT_EQ(pre_tokenize(prefixed, "Hi"), (Strings{"\xC4\xA0Hi"}));
  json no_regex = prefixed;
  no_regex["use_regex"] = false;
  EXPECT_EQ(pre_tokenize(no_regex, "a b"), (Strings{"\xC4\xA0" "a\xC4\xA0" "b"}));
}

TEST(PreTokenizers, MetaspacePrependSchemes) {
  auto ms = [](const char* scheme, bool split) {
    return json{{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", scheme}, {"split", split}};
  };
  const std::string m = "\xE2\x96\x81";
  EXPECT_EQ(pre_tokenize(ms("always", true), "Hey friend"), (Strings{m + "Hey", m + "friend"}));
  EXPECT_EQ(pre_tokenize(ms("never", true), "Hey friend"), (Strings{"Hey", m + "friend"}));
  EXPECT_EQ(pre_tokenize(ms("always", false), "Hey friend"), (Strings{m + "Hey" + m + "friend"}));
  // "first" prepends only to the piece that starts the input (not to text after an added token).
  EXPECT_EQ(pre_tokenize(ms("first", false), "Hey"), (Strings{m + "Hey"}));
  EXPECT_EQ(pre_tokenize(ms("first", false), "Hey", 3), (Strings{"Hey"}));
  // Older files: add_prefix_space=false means "never" and must not contradict prepend_scheme.
  json legacy = {{"type", "Metaspace"}, {"replacement", "_"}, {"add_prefix_space", false}};
  EXPECT_EQ(pre_tokenize(legacy, "a b"), (Strings{"a", "_b"}));
  legacy["prepend_scheme"] = "always";
  EXPECT_THROW(pre_tokenize(legacy, "a"), Error);
}

TEST(PreTokenizers, DigitsWhitespaceSplitAndSequence) {
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", false}}, "Hey 123 friend!"),
            (Strings{"Hey ", "123", " friend!"}));
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", true}}, "Hey 123 friend!"),
            (Strings{"Hey ", "1", "2", "3", " friend!"}));
  EXPECT_EQ(pre_tokenize({{"type", "WhitespaceSplit"}}, " a\tb\xE3\x80\x80" "c "), (Strings{"a", "b", "c"}));
  const json seq = {{"type", "Sequence"},
                    {"pretokenizers", {{{"type", "WhitespaceSplit"}}, {{"type", "Digits"}, {"individual_digits", true}}}}};
  EXPECT_EQ(pre_tokenize(seq, "ab12 c"), (Strings{"ab", "1", "2", "c"}));
}

TEST(PreTokenizers, PiecesClaimedByAddedTokensAreLeftAlone) {
  const auto p = parse_pre_tokenizer(JsonView(json{{"type", "WhitespaceSplit"}}, "test"));
  std::vector<Piece> pieces(2);
  pieces[0].text = "a b";
  pieces[1].text = "<s> x";
  pieces[1].token = 7;
  p->pre_tokenize(pieces);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[2].text, "<s> x");
  EXPECT_EQ(pieces[2].token, 7);
}

}  // namespace
}  // namespace ferry::text::detail
