// Small tokenizer.json documents for unit tests: a BPE model over a handful of tokens that individual
// tests extend with the component under test.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

#include "ferry/text/tokenizer.h"

namespace ferry::text::testing {

/// A complete tokenizer.json with a BPE model: single letters a-e, space, "▁", the merges
/// a+b -> ab, ab+c -> abc, c+d -> cd, and no other components.
inline nlohmann::json tiny_tokenizer_json() {
  using nlohmann::json;
  json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"d", 3}, {"e", 4}, {" ", 5}, {"\xE2\x96\x81", 6},
                {"ab", 7}, {"abc", 8}, {"cd", 9}};
  return json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", json::array()},
              {"normalizer", nullptr},
              {"pre_tokenizer", nullptr},
              {"post_processor", nullptr},
              {"decoder", nullptr},
              {"model", {{"type", "BPE"},
                         {"dropout", nullptr},
                         {"unk_token", nullptr},
                         {"continuing_subword_prefix", nullptr},
                         {"end_of_word_suffix", nullptr},
                         {"fuse_unk", false},
                         {"byte_fallback", false},
                         {"ignore_merges", false},
                         {"vocab", vocab},
                         {"merges", json::array({"a b", "ab c", "c d"})}}}};
}

inline const std::string kSp = "\xE2\x96\x81";  // ▁

inline nlohmann::json special(int id, const char* content, bool is_special = true) {
  return nlohmann::json{{"id", id},        {"content", content},     {"single_word", false}, {"lstrip", false},
                        {"rstrip", false}, {"normalized", false}, {"special", is_special}};
}

// A SentencePiece-style vocabulary with byte fallback, as Llama-2 / TinyLlama / Mistral ship it: <unk> <s> </s>,
// the 256 byte pieces <0x00>..<0xFF> (ids 3..258), then a few pieces.
inline nlohmann::json sentencepiece_json(const nlohmann::json& decoder) {
  using nlohmann::json;
  json j = tiny_tokenizer_json();
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  int next = 259;
  for (const std::string& p : {kSp, std::string("i"), std::string("4"), kSp + "i", kSp + "the", std::string("a"),
                               kSp + "a", std::string("\xC3\xA9"), kSp + kSp, std::string("\xEF\xBF\xBD"),
                               std::string(" "), std::string("x") + kSp + "y"})
    vocab[p] = next++;
  j["model"]["vocab"] = vocab;
  j["model"]["merges"] = json::array();
  j["model"]["byte_fallback"] = true;
  j["model"]["unk_token"] = "<unk>";
  j["added_tokens"] = {special(0, "<unk>"), special(1, "<s>"), special(2, "</s>"), special(next, "<tool>", false)};
  j["decoder"] = decoder;
  return j;
}

inline nlohmann::json llama2_decoder() {
  return {{"type", "Sequence"},
          {"decoders",
           {{{"type", "Replace"}, {"pattern", {{"String", kSp}}}, {"content", " "}},
            {{"type", "ByteFallback"}},
            {{"type", "Fuse"}},
            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
}

inline Tokenizer load(const nlohmann::json& j) { return Tokenizer::from_json(j.dump(), "test tokenizer.json"); }

}  // namespace ferry::text::testing
