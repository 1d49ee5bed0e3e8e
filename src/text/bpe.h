// Bpe: the byte-pair-encoding model of tokenizer.json ("model": {"type": "BPE"}).
// Hugging Face: tokenizers/src/models/bpe/{model,word}.rs.
//
// A word is split into characters (looked up in the vocabulary, with <0xNN> byte fallback and the unk
// token for the rest), then merged: every adjacent pair with a merge rule sits in a min-heap keyed by
// (rank, position), and the lowest is merged until none is left, so a word of n symbols costs
// O(n log n) rather than the O(n^2) of rescanning. Results of words shorter than 256 bytes are kept in a
// cache of 50,000 entries (HF: 256 bytes, 10,000 entries). Supported options: unk_token, fuse_unk, byte_fallback,
// ignore_merges, continuing_subword_prefix, end_of_word_suffix. A non-zero dropout is rejected: it makes
// encoding random, which inference never wants.
//
// Thread-safety: tokenize() may be called from several threads at once (the cache is locked).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/json_view.h"
#include "text/model.h"

namespace ferry::text::detail {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

/// Open-addressing map from a token-id pair to its merge (rank, merged id); the hot lookup of BPE.
class MergeMap {
 public:
  struct Merge {
    std::uint32_t rank;
    std::int32_t new_id;
  };
  void reserve(std::size_t n);
  /// Inserts or overwrites (a later duplicate rule wins, as in HF's map).
  void insert(std::int32_t a, std::int32_t b, Merge m);
  const Merge* find(std::int32_t a, std::int32_t b) const;
  std::size_t size() const { return size_; }

 private:
  static std::uint64_t key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }
  static std::size_t hash(std::uint64_t k) { return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ull) >> 17); }
  void grow();
  std::vector<std::uint64_t> keys_;
  std::vector<Merge> values_;
  std::size_t size_ = 0, mask_ = 0;
};

class Bpe final : public Model {
 public:
  /// Builds the model from the "model" object of tokenizer.json.
  static std::unique_ptr<Bpe> parse(const JsonView& model);

  /// Appends the ids of `word` (one pre-tokenized piece) to `out`.
  void tokenize(std::string_view word, std::vector<std::int32_t>& out) const override;

  std::optional<std::int32_t> token_to_id(std::string_view token) const override;
  const std::string* id_to_token(std::int32_t id) const override;
  std::size_t vocab_size() const override { return vocab_.size(); }
  std::int32_t max_id() const override { return max_id_; }

 private:
  void merge_word(std::string_view word, std::vector<std::int32_t>& out) const;

  Vocab vocab_;
  std::unordered_map<std::int32_t, std::string> vocab_r_;
  MergeMap merges_;
  std::optional<std::string> unk_token_;
  std::optional<std::string> continuing_subword_prefix_;
  std::optional<std::string> end_of_word_suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::int32_t max_id_ = -1;
  std::int32_t byte_ids_[256];  // id of <0xNN>, or -1
  // Id of each single-character token below U+10000 (-1: not in the vocabulary), so the first step of
  // merge_word avoids hashing strings; used only when no prefix/suffix decorates characters.
  std::vector<std::int32_t> char_ids_;

  // HF caches 10,000 words; more pays off on real text (thousands of distinct words per megabyte) and
  // changes nothing but speed.
  static constexpr std::size_t kCacheCapacity = 50000;
  static constexpr std::size_t kCacheMaxWordBytes = 256;
  mutable std::shared_mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace ferry::text::detail
