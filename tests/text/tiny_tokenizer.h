// Small tokenizer.json documents for unit tests: a BPE model over a handful of tokens that individual
// tests extend with the component under test.
#pragma once

#include <nlohmann/json.hpp>

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

inline Tokenizer load(const nlohmann::json& j) { return Tokenizer::from_json(j.dump(), "test tokenizer.json"); }

}  // namespace ferry::text::testing
