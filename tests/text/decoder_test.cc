// Unit tests of decoders and post-processors, built from their tokenizer.json form. Expected outputs are
// those of Hugging Face tokenizers' own unit tests (decoders/*.rs) where it has one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ferry/core/error.h"

#include "text/decoder.h"
#include "text/post_processor.h"

namespace ferry::text::detail {
namespace {

using nlohmann::json;
using Strings = std::vector<std::string>;

Strings chain(const json& spec, Strings tokens) {
  parse_decoder(JsonView(spec, "test"))->decode_chain(tokens);
  return tokens;
}

std::string joined(const json& spec, Strings tokens) {
  std::string out;
  for (const auto& t : chain(spec, std::move(tokens))) out += t;
  return out;
}

TEST(Decoders, ByteLevelRestoresBytesAndRepairsUtf8) {
  const json bl = {{"type", "ByteLevel"}};
  EXPECT_EQ(joined(bl, {"Hello", "\xC4\xA0my", "\xC4\xA0" "friend"}), "Hello my friend");
  EXPECT_EQ(joined(bl, {"\xC3\x83", "\xC2\xA9"}), "\xC3\xA9");      // two byte tokens make é
  EXPECT_EQ(joined(bl, {"\xC3\x83"}), "\xEF\xBF\xBD");              // half a character -> U+FFFD
  EXPECT_EQ(joined(bl, {"<|\xE6\x97\xA5|>"}), "<|\xE6\x97\xA5|>");  // outside the byte alphabet: as is
}

TEST(Decoders, MetaspaceDropsTheFirstTokensMarkers) {
  const json ms = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}, {"split", true}};
  EXPECT_EQ(chain(ms, {"\xE2\x96\x81Hey", "\xE2\x96\x81" "friend!"}), (Strings{"Hey", " friend!"}));
  json never = ms;
  never["prepend_scheme"] = "never";
  EXPECT_EQ(chain(never, {"\xE2\x96\x81Hey", "\xE2\x96\x81" "friend!"}), (Strings{" Hey", " friend!"}));
}

TEST(Decoders, ByteFallbackFuseStripReplace) {
  const json bf = {{"type", "ByteFallback"}};
  EXPECT_EQ(chain(bf, {"<0x61>"}), (Strings{"a"}));
  EXPECT_EQ(chain(bf, {"Hey", "friend!"}), (Strings{"Hey", "friend!"}));
  EXPECT_EQ(chain(bf, {"<0xE5>", "<0x8f>", "<0xab>", "a"}), (Strings{"\xE5\x8F\xAB", "a"}));
  EXPECT_EQ(chain(bf, {"<0xE5>", "<0x8f>", "a"}), (Strings{"\xEF\xBF\xBD", "\xEF\xBF\xBD", "a"}));
  EXPECT_EQ(chain({{"type", "Fuse"}}, {"Hey", " friend!"}), (Strings{"Hey friend!"}));
  EXPECT_EQ(chain({{"type", "Strip"}, {"content", "H"}, {"start", 1}, {"stop", 0}}, {"Hey", " friend!", "HHH"}),
            (Strings{"ey", " friend!", "HH"}));
  EXPECT_EQ(chain({{"type", "Strip"}, {"content", "y"}, {"start", 0}, {"stop", 1}}, {"Hey", " friend!"}),
            (Strings{"He", " friend!"}));
  EXPECT_EQ(chain({{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                  {"\xE2\x96\x81Hey", "\xE2\x96\x81\xE2\x96\x81"}),
            (Strings{" Hey", "  "}));
}

TEST(Decoders, Llama2SequenceDecodes) {
  const json seq = {{"type", "Sequence"},
                    {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                                  {{"type", "ByteFallback"}},
                                  {{"type", "Fuse"}},
                                  {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  EXPECT_EQ(joined(seq, {"\xE2\x96\x81Hello", "\xE2\x96\x81", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>"}), "Hello \xF0\x9F\x98\x80");
}

TEST(Decoders, BpeAndWordPiece) {
  EXPECT_EQ(joined({{"type", "BPEDecoder"}, {"suffix", "</w>"}}, {"My</w>", "na", "me</w>", "is</w>"}), "My name is");
  EXPECT_EQ(joined({{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", false}},
                   {"##uelo", "Ara", "##új", "##o", "No", "##guera"}),
            "##uelo Araújo Noguera");
  EXPECT_EQ(joined({{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}, {"hi", "!", "it", "'s"}), "hi! it's");
}

std::vector<std::int32_t> post(const json& spec, std::vector<std::int32_t> ids, bool add) {
  parse_post_processor(JsonView(spec, "test"))->process(ids, add);
  return ids;
}

TEST(PostProcessors, TemplatesAndClsSep) {
  const json tmpl = {{"type", "TemplateProcessing"},
                     {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                 {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
                     {"pair", json::array({"$A", "$B"})},
                     {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}},
                                         {"</s>", {{"id", "</s>"}, {"ids", {2}}, {"tokens", {"</s>"}}}}}}};
  EXPECT_EQ(post(tmpl, {7, 8}, true), (std::vector<std::int32_t>{1, 7, 8, 2}));
  EXPECT_EQ(post(tmpl, {7, 8}, false), (std::vector<std::int32_t>{7, 8}));
  const json roberta = {{"type", "RobertaProcessing"}, {"sep", {"</s>", 2}}, {"cls", {"<s>", 0}},
                        {"trim_offsets", true}, {"add_prefix_space", true}};
  EXPECT_EQ(post(roberta, {5}, true), (std::vector<std::int32_t>{0, 5, 2}));
  const json seq = {{"type", "Sequence"}, {"processors", {{{"type", "ByteLevel"}, {"trim_offsets", false}}, tmpl}}};
  EXPECT_EQ(post(seq, {9}, true), (std::vector<std::int32_t>{1, 9, 2}));

  json missing = tmpl;
  missing["special_tokens"].erase("</s>");
  EXPECT_THROW(post(missing, {1}, true), Error);
}

}  // namespace
}  // namespace ferry::text::detail
