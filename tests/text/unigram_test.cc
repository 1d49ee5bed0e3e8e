// Unit tests of the Unigram model and the Precompiled normalizer: segmentation, unknown runs, byte fallback,
// score parsing, a T5-style pipeline, charsmap semantics, and malformed files (each a ferry::Error naming the
// field, never a crash). Every expected value is what Hugging Face tokenizers 0.23 returns for the same input
// (unigram_oracle_test.cc compares whole converted T5-family files).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/text/tokenizer.h"
#include "support/error_of.h"
#include "text/normalizer.h"
#include "text/unigram.h"
#include "tiny_tokenizer.h"

namespace ferry::text {
namespace {

using nlohmann::json;
using Ids = std::vector<TokenId>;

json unigram_json(const json& vocab, const json& unk_id = 0, bool byte_fallback = false) {
  return json{{"version", "1.0"},        {"added_tokens", json::array()}, {"normalizer", nullptr},
              {"pre_tokenizer", nullptr}, {"post_processor", nullptr},    {"decoder", nullptr},
              {"model", {{"type", "Unigram"}, {"unk_id", unk_id}, {"vocab", vocab}, {"byte_fallback", byte_fallback}}}};
}

// A Unigram vocabulary: [["piece", score], ...] (a braced list of pairs would make nlohmann build an object).
json pieces(std::initializer_list<std::pair<std::string, double>> list) {
  json out = json::array();
  for (const auto& [piece, score] : list) out.push_back(json::array({piece, score}));
  return out;
}

// HF's own example (models/unigram/model.rs, Unigram::encode).
const json kAbcd = pieces({{"<unk>", 0.0}, {"a", 0.0}, {"b", 0.0}, {"c", 0.0}, {"d", 0.0},
                           {"cd", 1.0}, {"ab", 2.0}, {"abc", 5.0}, {"abcd", 10.0}});

TEST(Unigram, ViterbiPicksTheBestScoringSegmentation) {
  const Tokenizer tok = testing::load(unigram_json(kAbcd));
  EXPECT_EQ(tok.encode("abcdacdxx"), (Ids{8, 1, 5, 0}));  // abcd a cd <unk>("xx", fused)
  EXPECT_EQ(tok.encode(""), Ids{});
  EXPECT_EQ(tok.vocab_size(), 9u);
  EXPECT_EQ(tok.token_to_id("abc"), 7);
  EXPECT_EQ(tok.id_to_token(5), "cd");
  EXPECT_EQ(tok.id_to_token(9), std::nullopt);
}

TEST(Unigram, UnknownRunsFuseWithTheUnkPieceItself) {
  const Tokenizer tok = testing::load(unigram_json(kAbcd));
  // "<unk>" in the text is the unk piece (id 0), so it fuses with the unknown "z" after it.
  EXPECT_EQ(tok.encode("xyab<unk>z"), (Ids{0, 6, 0}));
  EXPECT_EQ(tok.encode("x<unk>"), (Ids{0}));
}

TEST(Unigram, ByteFallbackSpellsUnknownRunsAsBytesWhenEveryByteHasAPiece) {
  const json vocab = pieces({{"<unk>", 0}, {"a", -1}, {"<0x78>", -1}, {"<0xC3>", -1}, {"<0xA9>", -1}});
  const Tokenizer tok = testing::load(unigram_json(vocab, 0, true));
  EXPECT_EQ(tok.encode("axa"), (Ids{1, 2, 1}));
  EXPECT_EQ(tok.encode("xx"), (Ids{2, 2}));
  EXPECT_EQ(tok.encode("\xC3\xA9"), (Ids{3, 4}));
  EXPECT_EQ(tok.encode("a\xC3\xA9ya"), (Ids{1, 0, 1}));  // "éy" fused, and "y" (0x79) has no piece: <unk>
  // byte_fallback without any <0x..> piece loads (as in HF) and falls back to unk.
  const Tokenizer plain = testing::load(unigram_json(kAbcd, 0, true));
  EXPECT_EQ(plain.encode("ax"), (Ids{1, 0}));
}

TEST(Unigram, APieceListedTwiceMapsToItsLastId) {
  const Tokenizer tok = testing::load(unigram_json(pieces({{"<unk>", 0}, {"a", -1}, {"a", -2}, {"b", -3}})));
  EXPECT_EQ(tok.encode("ab"), (Ids{2, 3}));
  EXPECT_EQ(tok.token_to_id("a"), 2);
  EXPECT_EQ(tok.id_to_token(1), "a");
  EXPECT_EQ(tok.vocab_size(), 4u);
}

TEST(Unigram, WithoutUnkIdAnUnknownCharacterIsAnError) {
  const Tokenizer tok = testing::load(unigram_json(kAbcd, nullptr));
  EXPECT_EQ(tok.encode("abcd"), (Ids{8}));
  EXPECT_NE(test::error_of([&] { tok.encode("abx"); }).find("no unk_id"), std::string::npos);
  const Tokenizer empty = testing::load(unigram_json(json::array(), nullptr));
  EXPECT_EQ(empty.encode(""), Ids{});
  EXPECT_EQ(empty.vocab_size(), 0u);
  EXPECT_THROW(empty.encode("a"), Error);
}

TEST(Unigram, AModelWithoutTypeIsUnigramWhenItsVocabIsAList) {
  json j = unigram_json(kAbcd);
  j["model"].erase("type");
  EXPECT_EQ(testing::load(j).encode("abcd"), (Ids{8}));
}

// serde_json (without float_roundtrip) reads -13.853573322296143 one ulp off the correctly rounded value, and
// that breaks the tie a + b == ab: HF picks "a" "b". ferry must read scores the same way.
TEST(Unigram, ScoresAreReadAsSerdeJsonReadsThem) {
  const std::string text = R"({"version":"1.0","added_tokens":[],"normalizer":null,"pre_tokenizer":null,
    "post_processor":null,"decoder":null,"model":{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0.0],
    ["a",-6.753249645233154],["b",-7.100323677062988],["ab",-13.853573322296143]]}})";
  EXPECT_EQ(Tokenizer::from_json(text).encode("ab"), (Ids{1, 2}));

  auto bits = [](const char* number) {
    const json j = json::parse(number);
    const double d = detail::serde_json_f64(detail::JsonView(j, "test"));
    std::uint64_t u;
    std::memcpy(&u, &d, sizeof(u));
    return u;
  };
  EXPECT_EQ(bits("-13.853573322296143"), 0xC02BB50790000001ull);  // correctly rounded: ...000
  EXPECT_EQ(bits("-6.753249645233154"), 0xC01B0353E0000000ull);
  EXPECT_EQ(bits("3"), 0x4008000000000000ull);
  EXPECT_EQ(bits("-1.5e-05"), 0xBEEF75104D551D69ull);
}

// A T5-shaped file: WhitespaceSplit + Metaspace "always", Metaspace decoder, </s> appended by the template.
TEST(Unigram, T5StylePipeline) {
  const std::string sp = "\xE2\x96\x81";
  json j = unigram_json(pieces({{"<pad>", 0.0}, {"</s>", 0.0}, {"<unk>", 0.0}, {sp, -2.0}, {sp + "he", -3.0},
                                {"llo", -3.5}, {"l", -4.0}, {"o", -4.0}, {"h", -4.5}, {"e", -4.5},
                                {sp + "world", -5.0}, {"w", -6}, {"r", -6}, {"d", -6}}),
                        2);
  j["added_tokens"] = json::array({testing::special(1, "</s>")});
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", {{{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}}}}};
  const json metaspace = {{"type", "Metaspace"}, {"replacement", sp}, {"prepend_scheme", "always"}, {"split", true}};
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "WhitespaceSplit"}}, metaspace}}};
  j["decoder"] = metaspace;
  const json seq_a = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  const json seq_b = {{"Sequence", {{"id", "B"}, {"type_id", 0}}}};
  const json eos = {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}};
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {seq_a, eos}},
                         {"pair", {seq_a, eos, seq_b, eos}},
                         {"special_tokens", {{"</s>", {{"id", "</s>"}, {"ids", {1}}, {"tokens", {"</s>"}}}}}}};
  const Tokenizer tok = testing::load(j);
  EXPECT_EQ(tok.encode("hello world"), (Ids{4, 5, 10, 1}));
  EXPECT_EQ(tok.encode("hello world", false), (Ids{4, 5, 10}));
  EXPECT_EQ(tok.encode("  hello   world  "), (Ids{4, 5, 10, 1}));
  EXPECT_EQ(tok.encode("hello</s>world"), (Ids{4, 5, 1, 10, 1}));
  EXPECT_EQ(tok.encode(""), (Ids{1}));
  EXPECT_EQ(tok.encode("x"), (Ids{3, 2, 1}));
  EXPECT_EQ(tok.decode(Ids{4, 5, 10, 1}), "hello world</s>");
  EXPECT_EQ(tok.decode(Ids{4, 5, 10, 1}, true), "hello world");
  EXPECT_EQ(tok.decode(Ids{3, 2, 1}, true), "<unk>");
}

// ---- Precompiled ---------------------------------------------------------------------------------

// SentencePiece's charsmap for the rules A -> a, ™ -> TM, U+200B -> "", e + U+0301 -> é, Ａ -> A (spm's
// normalization_rule_tsv), 1039 bytes.
const char* kCharsmap =
    "AAQAAAAAAQBBDQAABgAAgMwYAgCBBQAACAAAgIsFAAAAAACAgBQCAKINAAADAACAvJwCAIScAgChDQAAAQAAgA4AAAARAAAAEAAAABMAAAASAAAAFQ"
    "AAABQAAAAXAAAAFgAAABkAAAAYAAAAGwAAABoAAAAdAAAAHAAAAB8AAAAeAAAAIQAAACAAAAAjAAAAIgAAACUAAABlqAMAJwAAACYAAAApAAAAKAAA"
    "ACsAAAAqAAAALQAAACwAAAAvAAAALgAAADEAAAAwAAAAMwAAADIAAAA1AAAANAAAADcAAAA2AAAAOQAAADgAAAA7AAAAOgAAAD0AAAA8AAAAPwAAAD"
    "4AAABBAAAAQAAAAEMAAABCAAAARQAAAEQAAABHAAAARgAAAEkAAABIAAAASwAAAEoAAABNAAAATAAAAE8AAABOAAAAUQAAAFAAAABTAAAAUgAAAFUA"
    "AABUAAAAVwAAAFYAAABZAAAAWAAAAFsAAABaAAAAXQAAAFwAAABfAAAAXgAAAGEAAABgAAAAYwAAAGIAAABlAAAAZAAAAGcAAABmAAAAaQAAAGgAAA"
    "BrAAAAagAAAG0AAABsAAAAbwAAAG4AAABxAAAAcAAAAHMAAAByAAAAdQAAAHQAAAB3AAAAdgAAAHkAAAB4AAAAewAAAHoAAAB9AAAAfAAAAH8AAAB+"
    "AAAAgQAAAIAAAACDAAAAggAAAIUAAACEAAAAhwAAAIYAAACJAAAAiAAAAIsAAACKAAAAjQAAAIwAAACPAAAAjgAAAJEAAACQAAAAkwAAAJIAAACVAA"
    "AAlAAAAJcAAACWAAAAmQAAAJgAAACbAAAAmgAAAJ0AAACcAAAAnwAAAJ4AAAChAAAAoAAAAOKoAACiAAAApQAAAKQAAACnAAAApgAAAKkAAACoAAAA"
    "qwAAAKoAAACtAAAArAAAAK8AAADvYAAAsQAAALAAAACzAAAAsgAAALUAAAC0AAAAtwAAALYAAAC5AAAAuAAAALsAAAC6AAAAvQAAALwAAAC/AAAAvg"
    "AAAMEAAADAAAAAwwAAAMIAAADFAAAAxAAAAMcAAADGAAAAyQAAAMgAAADLAAAAygAAAM0AAADMAAAAzwAAAM4AAADRAAAA0AAAANMAAADSAAAA1QAA"
    "ANQAAADXAAAA1gAAANkAAADYAAAA2wAAANoAAADdAAAA3AAAAN8AAADeAAAA4QAAAOAAAADjAAAA4gAAAOUAAADkAAAA5wAAAOYAAADpAAAA6AAAAO"
    "sAAADqAAAA7QAAAOwAAADvAAAA7gAAAPEAAADwAAAA8wAAAPIAAAD1AAAA9AAAAPcAAAD2AAAA+QAAAPgAAAD7AAAA+gAAAP0AAAD8AAAA/wAAAP4A"
    "AAAAQQBUTQBhAMOpAA==";

std::string precompiled(const std::string& charsmap, std::string text) {
  const json spec = {{"type", "Precompiled"}, {"precompiled_charsmap", charsmap}};
  detail::parse_normalizer(detail::JsonView(spec, "test"))->normalize(text);
  return text;
}

TEST(Precompiled, RewritesAsSpmPrecompiledDoes) {
  EXPECT_EQ(precompiled(kCharsmap, "ABC"), "aBC");
  EXPECT_EQ(precompiled(kCharsmap, "x\xE2\x84\xA2y"), "xTMy");             // x™y
  EXPECT_EQ(precompiled(kCharsmap, "a\xE2\x80\x8B" "b"), "ab");            // zero-width space removed
  EXPECT_EQ(precompiled(kCharsmap, "\xE2\x80\x8B" "A"), "a");
  EXPECT_EQ(precompiled(kCharsmap, "e\xCC\x81"), "\xC3\xA9");              // e + U+0301 as one grapheme
  EXPECT_EQ(precompiled(kCharsmap, "\xEF\xBC\xA1\xEF\xBC\xA1"), "AA");     // ＡＡ
  EXPECT_EQ(precompiled(kCharsmap, std::string("\x00" "A", 2)), std::string("\x00" "a", 2));  // '\0' ends a search
  // A grapheme under 6 bytes that an entry is a prefix of becomes that entry's replacement; the rest of the
  // grapheme is dropped (spm_precompiled: "Yes, this seems broken").
  EXPECT_EQ(precompiled(kCharsmap, "A\xCC\x81"), "a");
  EXPECT_EQ(precompiled(kCharsmap, "\xEF\xBC\xA1\xCC\x81"), "A");           // Ａ + U+0301
  EXPECT_EQ(precompiled(kCharsmap, "e\xCC\x81\xCC\x81"), "\xC3\xA9");
  // 6 bytes or more: character by character.
  EXPECT_EQ(precompiled(kCharsmap, "A\xCC\x81\xCC\x81\xCC\x81"), "a\xCC\x81\xCC\x81\xCC\x81");
}

TEST(Precompiled, AnEmptyCharsmapIsTheIdentity) {
  EXPECT_EQ(precompiled("", "ABC \xE2\x84\xA2"), "ABC \xE2\x84\xA2");
  EXPECT_EQ(precompiled("AAAAAA==", "ABC"), "ABC");  // a trie of zero units
}

TEST(Precompiled, ACorruptTrieIsAnErrorNotACrash) {
  // One unit whose offset sends 'a' past the end of the array.
  EXPECT_NE(test::error_of([] { precompiled("BAAAAAAEAAA=", "a"); }).find("corrupt"), std::string::npos);
}

// ---- Malformed files -----------------------------------------------------------------------------

struct Bad {
  const char* name;
  std::function<void(json&)> corrupt;
  std::vector<const char*> message_has;
};

TEST(Unigram, MalformedFilesFailNamingTheField) {
  const std::vector<Bad> cases = {
      {"missing vocab", [](json& j) { j["model"].erase("vocab"); }, {"model.vocab", "missing field"}},
      {"vocab is an object", [](json& j) { j["model"]["vocab"] = {{"a", 0}}; }, {"model.vocab", "expected an array"}},
      {"entry of one item", [](json& j) { j["model"]["vocab"][1] = json::array({"a"}); }, {"model.vocab[1]", "[piece, score] pair"}},
      {"entry of three items", [](json& j) { j["model"]["vocab"][1] = {"a", -1.5, 3}; }, {"model.vocab[1]", "pair"}},
      {"entry is a string", [](json& j) { j["model"]["vocab"][1] = "a"; }, {"model.vocab[1]", "pair"}},
      {"score is a string", [](json& j) { j["model"]["vocab"][2] = {"b", "-1"}; }, {"model.vocab[2][1]", "expected a number"}},
      {"score is null", [](json& j) { j["model"]["vocab"][2] = {"b", nullptr}; }, {"model.vocab[2][1]", "expected a number"}},
      {"piece is a number", [](json& j) { j["model"]["vocab"][2] = {7, -1.0}; }, {"model.vocab[2][0]", "expected a string"}},
      {"unk_id out of range", [](json& j) { j["model"]["unk_id"] = 9; }, {"model.unk_id", "out of range", "9 pieces"}},
      {"unk_id negative", [](json& j) { j["model"]["unk_id"] = -1; }, {"model.unk_id", "non-negative integer"}},
      {"unk_id not an integer", [](json& j) { j["model"]["unk_id"] = 1.0; }, {"model.unk_id", "non-negative integer"}},
      {"empty vocab with unk_id", [](json& j) { j["model"]["vocab"] = json::array(); }, {"model.unk_id", "vocabulary is empty"}},
      {"byte_fallback not a bool", [](json& j) { j["model"]["byte_fallback"] = "yes"; }, {"model.byte_fallback", "true or false"}},
      {"charsmap not base64", [](json& j) { j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "!!!!"}}; },
       {"normalizer.precompiled_charsmap", "not valid base64", "offset 0"}},
      {"charsmap of odd length", [](json& j) { j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAA"}}; },
       {"normalizer.precompiled_charsmap", "not valid base64", "multiple of 4"}},
      {"charsmap with stray bits", [](json& j) { j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AB=="}}; },
       {"not valid base64", "unused bits"}},
      {"charsmap shorter than its size", [](json& j) { j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAA="}}; },
       {"normalizer.precompiled_charsmap", "truncated", "2 bytes"}},
      {"charsmap trie truncated", [](json& j) { j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "CAAAAA=="}}; },
       {"normalizer.precompiled_charsmap", "truncated", "claims 8 bytes"}},
      {"charsmap strings not UTF-8", [](json& j) { j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAAAP8="}}; },
       {"normalizer.precompiled_charsmap", "not valid UTF-8"}},
      {"charsmap not a string", [](json& j) { j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", 5}}; },
       {"normalizer.precompiled_charsmap", "expected a string"}},
      {"charsmap null", [](json& j) { j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", nullptr}}; },
       {"normalizer.precompiled_charsmap", "missing field"}},
  };
  for (const Bad& c : cases) {
    json j = unigram_json(kAbcd);
    c.corrupt(j);
    try {
      testing::load(j);
      ADD_FAILURE() << c.name << ": loaded without error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      for (const char* want : c.message_has) {
        EXPECT_NE(msg.find(want), std::string::npos) << c.name << ": message lacks \"" << want << "\": " << msg;
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.name << ": threw a non-ferry exception: " << e.what();
    }
  }
}

}  // namespace
}  // namespace ferry::text
