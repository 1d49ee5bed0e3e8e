// Unit tests of the BPE model, added tokens, encode/decode and DecodeStream, on tiny hand-written
// tokenizer.json documents (tiny_tokenizer.h). The oracle test covers real configurations end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/text/tokenizer.h"
#include "tiny_tokenizer.h"

namespace ferry::text {
namespace {

using nlohmann::json;
using testing::load;
using testing::tiny_tokenizer_json;
using Ids = std::vector<TokenId>;

TEST(Bpe, MergesByRank) {
  const Tokenizer tok = load(tiny_tokenizer_json());
  EXPECT_EQ(tok.encode("abc"), (Ids{8}));         // a+b (rank 0), then ab+c (rank 1)
  EXPECT_EQ(tok.encode("abcd"), (Ids{8, 3}));     // ab+c outranks c+d
  EXPECT_EQ(tok.encode("cdab"), (Ids{9, 7}));
  EXPECT_EQ(tok.encode("eab"), (Ids{4, 7}));
  EXPECT_EQ(tok.encode(""), (Ids{}));
  EXPECT_EQ(tok.encode("xa"), (Ids{0}));  // no unk_token: unknown characters vanish, as in HF
}

TEST(Bpe, MergesListedAsPairsAndLaterDuplicatesWin) {
  json j = tiny_tokenizer_json();
  j["model"]["merges"] = json::array({json::array({"c", "d"}), json::array({"a", "b"}), json::array({"ab", "c"})});
  EXPECT_EQ(load(j).encode("abcd"), (Ids{7, 9}));  // now c+d is rank 0
}

TEST(Bpe, UnkTokenFusesWhenAsked) {
  json j = tiny_tokenizer_json();
  j["model"]["vocab"]["<unk>"] = 10;
  j["model"]["unk_token"] = "<unk>";
  EXPECT_EQ(load(j).encode("axyb"), (Ids{0, 10, 10, 1}));
  j["model"]["fuse_unk"] = true;
  EXPECT_EQ(load(j).encode("axyb"), (Ids{0, 10, 1}));
  j["model"]["unk_token"] = "<missing>";
  EXPECT_THROW(load(j).encode("x"), Error);  // like HF: reported when needed
}

TEST(Bpe, ByteFallbackSpellsUnknownCharactersAsBytes) {
  json j = tiny_tokenizer_json();
  j["model"]["vocab"]["<0xC3>"] = 21;
  j["model"]["vocab"]["<0xA9>"] = 20;
  j["model"]["byte_fallback"] = true;
  j["model"]["vocab"]["<unk>"] = 10;
  j["model"]["unk_token"] = "<unk>";
  j["decoder"] = {{"type", "ByteFallback"}};
  const Tokenizer tok = load(j);
  EXPECT_EQ(tok.encode("a\xC3\xA9"), (Ids{0, 21, 20}));  // é = C3 A9
  EXPECT_EQ(tok.encode("\xC3\xA8"), (Ids{10}));           // A8 has no byte token: unk for the character
  EXPECT_EQ(tok.decode(Ids{0, 21, 20}), "a\xC3\xA9");
}

TEST(Bpe, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  json j = tiny_tokenizer_json();
  j["model"]["vocab"]["bc"] = 11;  // reachable only as a whole word: no merge makes it
  EXPECT_EQ(load(j).encode("bc"), (Ids{1, 2}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(load(j).encode("bc"), (Ids{11}));
}

TEST(Bpe, LongWordsMergeInNearLinearTime) {
  json j = tiny_tokenizer_json();
  j["model"]["vocab"]["aa"] = 12;
  j["model"]["vocab"]["aaaa"] = 13;
  j["model"]["merges"] = json::array({"a a", "aa aa"});
  const Tokenizer tok = load(j);
  // One word of 256 x 1024 + 1 symbols against 256 words of 1024 + 1, timed in the same run rather than bounded in
  // seconds, so machine speed, the sanitizers and a busy host cancel out. With the heap the one word takes 2-3x as
  // long (up to 3.6x with 5 processes on 2 cores); a quadratic merge loop 256x (minutes for the long word). The
  // bound, 32x, leaves a wide margin either way; the best of 3 runs keeps preemptions out. Words of 256 bytes or more
  // bypass the word cache, so every part is merged.
  constexpr std::size_t kParts = 256, kPart = 1024;
  const std::string word(kParts * kPart + 1, 'a'), part(kPart + 1, 'a');
  auto seconds = [](auto&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double whole = 1e9, parts = 1e9;
  for (int run = 0; run < 3; ++run) {
    Ids ids;
    whole = std::min(whole, seconds([&] { ids = tok.encode(word); }));
    ASSERT_EQ(ids.size(), kParts * kPart / 4 + 1);
    EXPECT_EQ(ids.front(), 13);
    EXPECT_EQ(ids.back(), 0);
    std::vector<Ids> part_ids(kParts);
    parts = std::min(parts, seconds([&] { for (Ids& p : part_ids) p = tok.encode(part); }));
    EXPECT_EQ(part_ids.back().size(), kPart / 4 + 1);
  }
  EXPECT_LT(whole, 32 * parts) << "one word of " << word.size() << " symbols took " << whole << " s, " << kParts
                               << " words of " << part.size() << " took " << parts << " s: the merge is not n log n";
}

TEST(AddedTokens, IdsFollowHuggingFacesAssignment) {
  json j = tiny_tokenizer_json();
  j["added_tokens"] = json::array({
      {{"id", 5}, {"content", "ab"}, {"special", false}},     // already in the vocab: keeps id 7
      {{"id", 10}, {"content", "<s>"}, {"special", true}},    // new: vocab size (10)
      {{"id", 11}, {"content", "</s>"}, {"special", true}},   // next: 11
  });
  ScopedLogCapture log(LogLevel::Warning);
  const Tokenizer tok = load(j);
  EXPECT_EQ(tok.token_to_id("ab"), 7);
  EXPECT_EQ(tok.token_to_id("<s>"), 10);
  EXPECT_EQ(tok.token_to_id("</s>"), 11);
  EXPECT_EQ(tok.vocab_size(), 12u);
  EXPECT_TRUE(tok.is_special(10));
  EXPECT_FALSE(tok.is_special(7));
  EXPECT_TRUE(log.contains("\"ab\" is listed with id 5 but gets id 7"));
}

json with_added(std::initializer_list<json> tokens) {
  json j = tiny_tokenizer_json();
  j["added_tokens"] = json::array();
  int id = 10;
  for (json t : tokens) {
    t["id"] = id++;
    j["added_tokens"].push_back(t);
  }
  return j;
}

TEST(AddedTokens, MatchedBeforeTheModelWithStripAndSingleWordRules) {
  const Tokenizer tok = load(with_added({
      {{"content", "<m>"}, {"lstrip", true}, {"normalized", false}},
      {{"content", "[x]"}, {"rstrip", true}, {"normalized", false}},
      {{"content", "de"}, {"single_word", true}, {"normalized", false}},
  }));
  EXPECT_EQ(tok.encode("a  <m>b"), (Ids{0, 10, 1}));          // lstrip swallows the spaces before <m>
  EXPECT_EQ(tok.encode("a [x]  b"), (Ids{0, 5, 11, 1}));      // rstrip swallows the spaces after [x]
  EXPECT_EQ(tok.encode("e de e"), (Ids{4, 5, 12, 5, 4}));     // a whole word: the added token (12)
  EXPECT_EQ(tok.encode("ede"), (Ids{4, 3, 4}));               // inside a word: left to the model
  EXPECT_EQ(tok.encode("<m><m>"), (Ids{10, 10}));
}

TEST(AddedTokens, NormalizedTokensMatchTheNormalizedText) {
  json j = with_added({{{"content", "ABE"}, {"normalized", true}}, {{"content", "DE"}, {"normalized", false}}});
  j["normalizer"] = {{"type", "Lowercase"}};
  const Tokenizer tok = load(j);
  EXPECT_EQ(tok.encode("xAbEx"), (Ids{10}));  // "abe" in the lowercased text
  EXPECT_EQ(tok.encode("DE de"), (Ids{11, 5, 3, 4}));  // raw match is case-sensitive
}

TEST(EncodeDecode, TemplateAddsSpecialTokensAndDecodeCanSkipThem) {
  json j = with_added({{{"content", "<s>"}, {"special", true}, {"normalized", false}}});
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({"<s>", "$A"})},
                         {"pair", json::array({"<s>", "$A", "$B"})},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {10}}, {"tokens", {"<s>"}}}}}}};
  j["decoder"] = {{"type", "Fuse"}};
  const Tokenizer tok = load(j);
  EXPECT_EQ(tok.encode("abc"), (Ids{10, 8}));
  EXPECT_EQ(tok.encode("abc", false), (Ids{8}));
  EXPECT_EQ(tok.decode(Ids{10, 8}), "<s>abc");
  EXPECT_EQ(tok.decode(Ids{10, 8}, true), "abc");
  EXPECT_EQ(tok.decode(Ids{8, 999, -1}), "abc");  // unknown ids are skipped
  EXPECT_EQ(tok.id_to_token(8), "abc");
  EXPECT_EQ(tok.id_to_token(999), std::nullopt);
}

TEST(EncodeDecode, WithoutDecoderTokensAreJoinedWithSpaces) {
  EXPECT_EQ(load(tiny_tokenizer_json()).decode(Ids{8, 3}), "abc d");
}

TEST(EncodeDecode, InvalidUtf8InputIsRepairedFirst) {
  json j = tiny_tokenizer_json();
  j["model"]["vocab"]["\xEF\xBF\xBD"] = 14;
  const Tokenizer tok = load(j);
  EXPECT_EQ(tok.encode("a\xFF" "b\xE2\x82"), (Ids{0, 14, 1, 14}));
}

}  // namespace
}  // namespace ferry::text
