// AddedVocabulary: the "added_tokens" of tokenizer.json (special tokens such as <s>, and user tokens),
// which are found in the text before the model sees it. Hugging Face:
// tokenizers/src/tokenizer/added_vocabulary.rs.
//
// Matching follows HF exactly: tokens with normalized=false are searched in the raw text first, then the
// remaining text is normalized and tokens with normalized=true are searched (as their normalized
// spelling) in it. Each search is leftmost-longest and non-overlapping; single_word rejects a match
// touching a word character (Unicode \w) on either side; lstrip/rstrip extend the match over adjacent
// whitespace. Ids are assigned as HF's add_tokens assigns them when loading (the "id" in the file is
// only checked, as HF does): an existing vocabulary id if the content has one, else the next free id.
// Version note: this follows tokenizers 0.23, where decoding a normalized=true token yields its
// normalized spelling (0.22 and earlier yield its content).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ferry/text/tokenizer.h"
#include "text/json_view.h"
#include "text/model.h"
#include "text/normalizer.h"
#include "text/piece.h"
#include "text/regex.h"

namespace ferry::text::detail {

/// Leftmost-longest multi-pattern search over bytes (a trie walked from each start position).
class TokenMatcher {
 public:
  void add(std::string_view pattern, std::int32_t id);
  /// Finds the leftmost-longest match starting at or after `from`; false when none.
  bool next(std::string_view text, std::size_t from, std::size_t& begin, std::size_t& end, std::int32_t& id) const;
  bool empty() const { return nodes_.size() <= 1; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, std::int32_t>> children;  // sorted by byte
    std::int32_t id = -1;                                           // token ending here, or -1
  };
  std::int32_t child(std::int32_t node, unsigned char b) const;
  std::vector<Node> nodes_{Node{}};
  bool first_byte_[256] = {};
};

class AddedVocabulary {
 public:
  /// Reads "added_tokens" (may be absent) and assigns ids against `model`.
  void build(const std::optional<JsonView>& list, const Model& model, const Normalizer* normalizer);

  /// Splits `text` into pieces claimed by added tokens and normalized pieces for the pre-tokenizer.
  void extract_and_normalize(std::string_view text, const Normalizer* normalizer, std::vector<Piece>& out) const;

  std::optional<std::int32_t> token_to_id(std::string_view content) const;
  const AddedToken* by_id(std::int32_t id) const;
  /// The string decode() and id_to_token() use for an added token: its normalized spelling when it is
  /// normalized=true and the normalizer changes it (HF tokenizers >= 0.23), else its content.
  const std::string* decode_form(std::int32_t id) const;
  bool is_special(std::string_view content) const { return special_.count(std::string(content)) != 0; }
  /// Every added token, in id order.
  std::vector<AddedToken> tokens() const;
  std::size_t size() const { return by_content_.size(); }

 private:
  void find_matches(std::string_view text, const TokenMatcher& matcher, const Piece& parent,
                    std::vector<Piece>& out) const;
  bool is_word_char_before(std::string_view text, std::size_t pos) const;
  bool is_word_char_at(std::string_view text, std::size_t pos) const;

  std::unordered_map<std::string, std::int32_t> by_content_;
  std::unordered_map<std::int32_t, AddedToken> by_id_;
  std::unordered_set<std::string> special_;
  std::unordered_map<std::int32_t, std::string> normalized_form_;  // only where it differs from content
  TokenMatcher raw_matcher_, normalized_matcher_;
  std::optional<Regex> word_char_;
};

}  // namespace ferry::text::detail
