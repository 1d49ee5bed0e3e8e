// DecodeStream: streamed pieces + finish() always equal decode(all ids), for every decoder ferry supports and any
// ids (byte-fallback runs that turn out invalid, incomplete byte-level sequences, skipped special tokens, ids
// outside the vocabulary), and step() never throws. The oracle test compares chunks with Hugging Face's own
// DecodeStream; this one needs no Python and runs thousands of random sequences per tokenizer.
#include <gtest/gtest.h>

#include <random>

#include "ferry/core/logging.h"
#include "ferry/text/tokenizer.h"
#include "text/byte_level.h"
#include "tiny_tokenizer.h"

namespace ferry::text {
namespace {

using nlohmann::json;
using testing::kSp;
using testing::llama2_decoder;
using testing::load;
using testing::sentencepiece_json;
using testing::special;
using testing::tiny_tokenizer_json;
using Ids = std::vector<TokenId>;

json metaspace_decoder() {
  return {{"type", "Sequence"},
          {"decoders",
           {{{"type", "ByteFallback"}},
            {{"type", "Metaspace"}, {"replacement", kSp}, {"prepend_scheme", "always"}, {"split", true}}}}};
}

// GPT-2 style: every byte's byte-level character, a few merged pieces, an added special token.
json byte_level_json() {
  json j = tiny_tokenizer_json();
  json vocab = json::object();
  int next = 0;
  for (int b = 0; b < 256; ++b) vocab[detail::byte_level_char(static_cast<unsigned char>(b))] = next++;
  auto bl = [](std::string_view s) {
    std::string out;
    detail::byte_level_encode(s, out);
    return out;
  };
  for (const char* p : {" the", "\xC3\xA9", "\xE4\xB8\xAD", " \xF0\x9F", "\x98\x80", "ing"}) vocab[bl(p)] = next++;
  j["model"]["vocab"] = vocab;
  j["model"]["merges"] = json::array();
  j["added_tokens"] = {special(next, "<|endoftext|>")};
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  return j;
}

json wordpiece_json() {
  json j = tiny_tokenizer_json();
  j["model"]["vocab"] = {{"a", 0}, {"##b", 1}, {".", 2}, {"n't", 3}, {"do", 4}, {"##s", 5}, {"'", 6}, {"[CLS]", 7}};
  j["model"]["merges"] = json::array();
  j["added_tokens"] = {special(7, "[CLS]")};
  j["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}};
  return j;
}

// BPEDecoder replaces the end-of-word suffix inside any piece, " " except in the last token: a piece with the
// suffix in its middle ("a</w>b") decodes differently once another token follows, which HF cannot stream.
json bpe_suffix_json() {
  json j = tiny_tokenizer_json();
  j["model"]["vocab"] = {{"a</w>", 0}, {"b", 1}, {"a</w>b", 2}, {"c</w>", 3}};
  j["model"]["merges"] = json::array();
  j["decoder"] = {{"type", "BPEDecoder"}, {"suffix", "</w>"}};
  return j;
}

struct Streamed {
  std::string text;      // pieces + finish()
  std::string finished;  // what finish() returned
};

Streamed stream_all(const Tokenizer& tok, const Ids& ids, bool skip) {
  DecodeStream stream(tok, skip);
  Streamed out;
  for (TokenId id : ids)
    if (auto piece = stream.step(id)) out.text += *piece;
  out.finished = stream.finish();
  out.text += out.finished;
  EXPECT_EQ(stream.emitted(), out.text);
  return out;
}

std::string show(const Ids& ids) {
  std::string out;
  for (TokenId id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return "[" + out + "]";
}

// `count` random sequences of 1..40 ids; `bias_low`..`bias_high` (byte pieces, say) drawn half the time, else any
// id up to a few past the vocabulary (unknown ids are skipped by decode).
void expect_streams_equal_decode(const Tokenizer& tok, int count, TokenId bias_low, TokenId bias_high, uint32_t seed) {
  ScopedLogCapture quiet(LogLevel::Error);
  std::mt19937 rng(seed);
  const auto vocab = static_cast<TokenId>(tok.vocab_size());
  std::uniform_int_distribution<TokenId> any(0, vocab + 2), biased(bias_low, bias_high);
  std::uniform_int_distribution<int> length(1, 40);
  int failures = 0;
  for (int n = 0; n < count && failures < 5; ++n) {
    Ids ids(static_cast<std::size_t>(length(rng)));
    for (TokenId& id : ids) id = (rng() & 1) ? biased(rng) : any(rng);
    for (const bool skip : {false, true}) {
      Streamed got;
      ASSERT_NO_THROW(got = stream_all(tok, ids, skip)) << show(ids);
      const std::string want = tok.decode(ids, skip);
      if (got.text != want) {
        ++failures;
        ADD_FAILURE() << show(ids) << (skip ? " skip_special_tokens" : "") << "\n  decode   \"" << want
                      << "\"\n  streamed \"" << got.text << "\"";
      }
    }
  }
}

TEST(DecodeStream, AnInvalidByteRunAfterEmittedTextIsNotAnError) {
  // The sequence of issue 14: <0x69> ("i", valid alone), two bytes that never complete a character, then "4".
  // ByteFallback decodes the whole run as U+FFFD per byte, so "i" must not be shown before the run ends; HF's
  // DecodeStream shows it and then raises.
  const Tokenizer tok = load(sentencepiece_json(llama2_decoder()));
  const TokenId i = 3 + 0x69, e4 = 3 + 0xE4, b8 = 3 + 0xB8, four = *tok.token_to_id("4");
  DecodeStream stream(tok);
  EXPECT_EQ(stream.step(i), std::nullopt);
  EXPECT_EQ(stream.step(e4), std::nullopt);
  EXPECT_EQ(stream.step(b8), std::nullopt);
  EXPECT_EQ(stream.step(four), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" "4");
  EXPECT_EQ(stream.finish(), "");
  EXPECT_EQ(stream.emitted(), tok.decode(Ids{i, e4, b8, four}));
}

TEST(DecodeStream, AValidByteRunIsShownWhenItEnds) {
  const Tokenizer tok = load(sentencepiece_json(llama2_decoder()));
  const TokenId sp_a = *tok.token_to_id(kSp + "a"), c3 = 3 + 0xC3, a9 = 3 + 0xA9;
  DecodeStream stream(tok);
  EXPECT_EQ(stream.step(sp_a), "a");  // Strip drops the first token's space, as decode does
  EXPECT_EQ(stream.step(c3), std::nullopt);
  EXPECT_EQ(stream.step(a9), std::nullopt);  // é is complete, but a further byte could still spoil the run
  EXPECT_EQ(stream.step(sp_a), "\xC3\xA9 a");
  EXPECT_EQ(stream.emitted(), tok.decode(Ids{sp_a, c3, a9, sp_a}));
}

TEST(DecodeStream, FinishReleasesARunAtTheEnd) {
  const Tokenizer tok = load(sentencepiece_json(llama2_decoder()));
  const TokenId sp_a = *tok.token_to_id(kSp + "a"), c3 = 3 + 0xC3, a9 = 3 + 0xA9;
  DecodeStream complete(tok);
  complete.step(sp_a);
  complete.step(c3);
  complete.step(a9);
  EXPECT_EQ(complete.finish(), "\xC3\xA9");
  DecodeStream broken(tok);
  broken.step(sp_a);
  broken.step(c3);
  EXPECT_EQ(broken.finish(), "\xEF\xBF\xBD");  // half of é: U+FFFD, as decode gives
  // The stream starts afresh after finish().
  EXPECT_EQ(broken.step(sp_a), "a");
  EXPECT_EQ(broken.emitted(), "a\xEF\xBF\xBD" "a");
}

TEST(DecodeStream, HoldsByteLevelTextUntilTheCharacterIsComplete) {
  const Tokenizer tok = load(byte_level_json());
  const TokenId e4 = 0xE4, b8 = 0xB8, ad = 0xAD, a = 'a';
  DecodeStream stream(tok);
  EXPECT_EQ(stream.step(a), "a");
  EXPECT_EQ(stream.step(e4), std::nullopt);
  EXPECT_EQ(stream.step(b8), std::nullopt);
  EXPECT_EQ(stream.step(ad), "\xE4\xB8\xAD");
  EXPECT_EQ(stream.step(e4), std::nullopt);
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
}

TEST(DecodeStream, KeepsTheSpaceThatMetaspaceDropsAtTheStart) {
  json j = tiny_tokenizer_json();
  j["model"]["vocab"] = {{"\xE2\x96\x81This", 0}};
  j["model"]["merges"] = json::array();
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}, {"split", true}};
  const Tokenizer tok = load(j);
  EXPECT_EQ(tok.decode(Ids{0, 0}), "This This");
  DecodeStream stream(tok);
  EXPECT_EQ(stream.step(0), "This");
  EXPECT_EQ(stream.step(0), " This");
}

TEST(DecodeStream, ADecoderThatIsNotPrefixStableFallsBackInsteadOfThrowing) {
  const Tokenizer tok = load(bpe_suffix_json());
  // "a</w>b" alone is "ab"; followed by "c</w>" it is "a bc". HF raises at the second step.
  EXPECT_EQ(tok.decode(Ids{2}), "ab");
  EXPECT_EQ(tok.decode(Ids{2, 3}), "a bc");
  DecodeStream stream(tok);
  std::string text = stream.step(2).value_or("");
  ASSERT_NO_THROW(text += stream.step(3).value_or(""));
  text += stream.finish();
  // What was shown cannot be taken back: the stream says so in a warning and sends the rest after the common part.
  EXPECT_EQ(stream.emitted(), text);
  EXPECT_EQ(text, "ab bc");
}

TEST(DecodeStream, RandomIdsLlama2Style) {
  expect_streams_equal_decode(load(sentencepiece_json(llama2_decoder())), 3000, 3, 258, 1);
}

TEST(DecodeStream, RandomIdsMetaspaceWithByteFallback) {
  expect_streams_equal_decode(load(sentencepiece_json(metaspace_decoder())), 3000, 3, 258, 2);
}

TEST(DecodeStream, RandomIdsByteLevel) {
  // Continuation bytes (0x80..0xBF) half the time: sequences that complete, break and restart.
  expect_streams_equal_decode(load(byte_level_json()), 3000, 0x80, 0xF4, 3);
}

TEST(DecodeStream, RandomIdsWordPiece) { expect_streams_equal_decode(load(wordpiece_json()), 3000, 0, 7, 4); }

TEST(DecodeStream, RandomIdsNoDecoder) { expect_streams_equal_decode(load(tiny_tokenizer_json()), 3000, 0, 9, 5); }

}  // namespace
}  // namespace ferry::text
