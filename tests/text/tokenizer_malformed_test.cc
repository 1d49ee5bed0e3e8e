// Malformed and unsupported tokenizer.json files: each must fail with a ferry::Error whose message names
// the field (or the unsupported component), never crash or load silently.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/text/tokenizer.h"
#include "tiny_tokenizer.h"

namespace ferry::text {
namespace {

using nlohmann::json;

struct MalformedCase {
  const char* name;
  std::function<void(json&)> corrupt;
  std::vector<const char*> message_has;  // substrings the error message must contain
};

const json kSpecial = {{"s", {{"id", "s"}, {"ids", {1}}, {"tokens", {"s"}}}}};

const std::vector<MalformedCase>& cases() {
  static const std::vector<MalformedCase> table = {
      {"root is an array", [](json& j) { j = json::array(); }, {"expected an object"}},
      {"unknown version", [](json& j) { j["version"] = "2.0"; }, {"version", "2.0"}},
      {"missing model", [](json& j) { j.erase("model"); }, {"missing field", "model"}},
      {"model is a string", [](json& j) { j["model"] = "BPE"; }, {"model", "expected an object"}},
      {"Unigram model with a BPE vocab", [](json& j) { j["model"]["type"] = "Unigram"; }, {"model.vocab", "expected an array"}},
      {"WordPiece model", [](json& j) { j["model"]["type"] = "WordPiece"; }, {"WordPiece model is not supported"}},
      {"unknown model type", [](json& j) { j["model"]["type"] = "Magic"; }, {"model.type", "unknown model type \"Magic\""}},
      {"missing vocab", [](json& j) { j["model"].erase("vocab"); }, {"model.vocab", "missing field"}},
      {"vocab is an array", [](json& j) { j["model"]["vocab"] = json::array(); }, {"model.vocab", "expected an object"}},
      {"vocab id is a string", [](json& j) { j["model"]["vocab"]["a"] = "0"; }, {"model.vocab.a", "non-negative integer"}},
      {"vocab id is negative", [](json& j) { j["model"]["vocab"]["a"] = -1; }, {"model.vocab.a", "non-negative integer"}},
      {"missing merges", [](json& j) { j["model"].erase("merges"); }, {"model.merges", "missing field"}},
      {"merges is an object", [](json& j) { j["model"]["merges"] = json::object(); }, {"model.merges", "expected an array"}},
      {"merge without space", [](json& j) { j["model"]["merges"][0] = "ab"; }, {"model.merges[0]", "bad merge \"ab\""}},
      {"merge with three parts", [](json& j) { j["model"]["merges"][1] = "a b c"; }, {"model.merges[1]", "bad merge"}},
      {"merge is a number", [](json& j) { j["model"]["merges"][2] = 3; }, {"model.merges[2]", "bad merge"}},
      {"merge pair of three", [](json& j) { j["model"]["merges"][0] = {"a", "b", "c"}; }, {"model.merges[0]", "3 items"}},
      {"merge token unknown", [](json& j) { j["model"]["merges"][0] = "a z"; }, {"model.merges[0]", "\"z\" is not in model.vocab"}},
      {"merged token unknown", [](json& j) { j["model"]["vocab"].erase("abc"); }, {"model.merges[1]", "merged token \"abc\""}},
      {"dropout set", [](json& j) { j["model"]["dropout"] = 0.1; }, {"model.dropout", "dropout is not supported"}},
      {"dropout not a number", [](json& j) { j["model"]["dropout"] = "x"; }, {"model.dropout", "expected a number"}},
      {"byte_fallback not a bool", [](json& j) { j["model"]["byte_fallback"] = 1; }, {"model.byte_fallback", "true or false"}},
      {"unk_token not a string", [](json& j) { j["model"]["unk_token"] = 0; }, {"model.unk_token", "expected a string"}},
      {"normalizer is a string", [](json& j) { j["normalizer"] = "NFC"; }, {"normalizer", "expected an object"}},
      {"normalizer without type", [](json& j) { j["normalizer"] = json::object(); }, {"normalizer.type", "missing field"}},
      {"unknown normalizer", [](json& j) { j["normalizer"] = {{"type", "Shout"}}; }, {"normalizer.type", "unknown normalizer type \"Shout\""}},
      {"BertNormalizer", [](json& j) { j["normalizer"] = {{"type", "BertNormalizer"}}; }, {"BertNormalizer normalizer is not supported"}},
      {"Precompiled without charsmap", [](json& j) { j["normalizer"] = {{"type", "Precompiled"}}; },
       {"normalizer.precompiled_charsmap", "missing field"}},
      {"Nmt normalizer", [](json& j) { j["normalizer"] = {{"type", "Nmt"}}; }, {"Nmt normalizer is not supported"}},
      {"Replace without content",
       [](json& j) { j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}}; }, {"normalizer.content", "missing field"}},
      {"Replace with odd pattern",
       [](json& j) { j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Glob", "*"}}}, {"content", ""}}; },
       {"normalizer.pattern", "{\"String\": ...} or {\"Regex\": ...}"}},
      {"Sequence normalizers not a list",
       [](json& j) { j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{"type", "NFC"}}}}; },
       {"normalizer.normalizers", "expected an array"}},
      {"nested normalizer error",
       [](json& j) { j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Strip"}}}}}; },
       {"normalizer.normalizers[1].strip_left", "missing field"}},
      {"bad Split regex",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}, {"invert", false}};
       },
       {"pre_tokenizer.pattern.Regex", "invalid regex"}},
      {"unknown Split behavior",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"}, {"invert", false}};
       },
       {"pre_tokenizer.behavior", "unknown split behavior \"Sideways\""}},
      {"Split without invert",
       [](json& j) { j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}}; },
       {"pre_tokenizer.invert", "missing field"}},
      {"Whitespace pre-tokenizer", [](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; },
       {"pre_tokenizer.type", "Whitespace pre-tokenizer is not supported"}},
      {"unknown pre-tokenizer", [](json& j) { j["pre_tokenizer"] = {{"type", "Chop"}}; }, {"unknown pre-tokenizer type \"Chop\""}},
      {"Metaspace replacement of two characters",
       [](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "ab"}}; },
       {"pre_tokenizer.replacement", "single character"}},
      {"Metaspace unknown scheme",
       [](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "sometimes"}}; },
       {"pre_tokenizer.prepend_scheme", "sometimes"}},
      {"ByteLevel without add_prefix_space", [](json& j) { j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"trim_offsets", true}}; },
       {"pre_tokenizer.add_prefix_space", "missing field"}},
      {"Digits flag not a bool", [](json& j) { j["pre_tokenizer"] = {{"type", "Digits"}, {"individual_digits", "yes"}}; },
       {"pre_tokenizer.individual_digits", "true or false"}},
      {"CTC decoder", [](json& j) { j["decoder"] = {{"type", "CTC"}}; }, {"decoder.type", "CTC decoder is not supported"}},
      {"unknown decoder", [](json& j) { j["decoder"] = {{"type", "Unzip"}}; }, {"decoder.type", "unknown decoder type"}},
      {"Strip decoder with negative stop",
       [](json& j) { j["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", -1}}; },
       {"decoder.stop", "non-negative integer"}},
      {"unknown post-processor", [](json& j) { j["post_processor"] = {{"type", "Glue"}}; }, {"post_processor.type", "unknown post-processor"}},
      {"template with a missing special token",
       [](json& j) {
         j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", {"<x>", "$A"}}, {"pair", {"$A", "$B"}},
                                {"special_tokens", kSpecial}};
       },
       {"post_processor.single[0]", "\"<x>\" is missing from special_tokens"}},
      {"single template with sequence B",
       [](json& j) {
         j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", {"$B"}}, {"pair", {"$A", "$B"}},
                                {"special_tokens", kSpecial}};
       },
       {"post_processor.single[0]", "sequence B"}},
      {"Roberta without cls", [](json& j) { j["post_processor"] = {{"type", "RobertaProcessing"}, {"sep", {"</s>", 2}}}; },
       {"post_processor.cls", "missing field"}},
      {"added_tokens not a list", [](json& j) { j["added_tokens"] = json::object(); }, {"added_tokens", "expected an array"}},
      {"added token without content", [](json& j) { j["added_tokens"] = {{{"id", 10}}}; }, {"added_tokens[0].content", "missing field"}},
      {"added token content not a string", [](json& j) { j["added_tokens"] = {{{"id", 10}, {"content", 5}}}; },
       {"added_tokens[0].content", "expected a string"}},
      {"added token without id", [](json& j) { j["added_tokens"] = {{{"content", "<x>"}}}; }, {"added_tokens[0].id", "missing field"}},
      {"added token flag not a bool", [](json& j) { j["added_tokens"] = {{{"id", 10}, {"content", "<x>"}, {"special", "yes"}}}; },
       {"added_tokens[0].special", "true or false"}},
  };
  return table;
}

TEST(TokenizerJson, TheBaseDocumentLoads) { EXPECT_NO_THROW(testing::load(testing::tiny_tokenizer_json())); }

TEST(TokenizerJson, MalformedFilesFailNamingTheField) {
  for (const MalformedCase& c : cases()) {
    json j = testing::tiny_tokenizer_json();
    c.corrupt(j);
    try {
      testing::load(j);
      ADD_FAILURE() << c.name << ": loaded without error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("test tokenizer.json"), std::string::npos) << c.name << ": " << msg;
      for (const char* want : c.message_has) {
        EXPECT_NE(msg.find(want), std::string::npos) << c.name << ": message lacks \"" << want << "\": " << msg;
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.name << ": threw a non-ferry exception: " << e.what();
    }
  }
}

TEST(TokenizerJson, NotJsonAtAll) {
  for (const char* text : {"", "{", "{\"model\": }", "null", "[1, 2"}) {
    EXPECT_THROW(Tokenizer::from_json(text), Error) << text;
  }
}

TEST(TokenizerJson, MissingFileNamesThePath) {
  try {
    Tokenizer::from_file("/nonexistent/dir/tokenizer.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/tokenizer.json"), std::string::npos) << e.what();
  }
}

TEST(TokenizerJson, TruncationAndPaddingAreIgnoredWithAWarning) {
  json j = testing::tiny_tokenizer_json();
  j["truncation"] = {{"max_length", 512}};
  ScopedLogCapture log(LogLevel::Warning);
  testing::load(j);
  EXPECT_TRUE(log.contains("\"truncation\" is set"));
}

}  // namespace
}  // namespace ferry::text
