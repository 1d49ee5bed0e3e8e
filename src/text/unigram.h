// Unigram: the unigram language model of tokenizer.json ("model": {"type": "Unigram"}), SentencePiece's
// model as T5, mT5, ALBERT, XLNet and others ship it. Hugging Face: tokenizers/src/models/unigram/
// {model,trie,serialization}.rs (Unigram::encode_optimized, the path HF always takes when not sampling).
//
// A word is segmented by Viterbi over the pieces' scores (log probabilities): from each character, every
// vocabulary piece the text continues with (a byte-trie walk, shortest first) extends the best path ending
// where it ends. A character that no single-character piece covers gets the unknown piece at the score
// min(scores) - 10 (HF's K_UNK_PENALTY). A candidate replaces a path only with a strictly higher score, so
// ties keep the first one found, as in HF. Consecutive unknown pieces are fused (HF's fuse_unk, always on for
// Unigram); a fused run is looked up whole, then spelled as <0xNN> pieces when byte_fallback is set and every
// byte has one, else becomes unk_id. An unknown character without an unk_id is an error, as in HF.
//
// Scores are read the way serde_json reads them (its default, not round-trip-exact, decimal parsing: the
// digits as an f64, then one multiplication or division by a power of ten), not correctly rounded: about
// one SentencePiece score in eight differs by one ulp, which can break a tie the other way.
//
// Thread-safety: tokenize() may be called from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/bpe.h"
#include "text/json_view.h"
#include "text/model.h"

namespace ferry::text::detail {

/// serde_json's f64 of a JSON number (see above); integers convert as Rust's `as f64` does. Throws
/// ferry::Error naming the field when `number` is not a number.
double serde_json_f64(const JsonView& number);

class Unigram final : public Model {
 public:
  /// Builds the model from the "model" object of tokenizer.json.
  static std::unique_ptr<Unigram> parse(const JsonView& model);

  void tokenize(std::string_view word, std::vector<std::int32_t>& out) const override;
  std::optional<std::int32_t> token_to_id(std::string_view token) const override;
  const std::string* id_to_token(std::int32_t id) const override;
  std::size_t vocab_size() const override { return pieces_.size(); }
  std::int32_t max_id() const override { return static_cast<std::int32_t>(pieces_.size()) - 1; }

 private:
  void build_trie();
  std::int32_t child(std::int32_t node, unsigned char byte) const;
  void push_unknown(std::string_view run, std::vector<std::int32_t>& out) const;

  std::vector<std::string> pieces_;  // by id
  std::vector<double> scores_;       // by id
  Vocab ids_;                        // piece -> id; a piece listed twice maps to its last id, as in HF
  std::optional<std::int32_t> unk_id_;
  bool byte_fallback_ = false;
  double unk_score_ = 0.0;     // min score - 10
  std::int32_t byte_ids_[256];  // id of <0xNN>, or -1

  // Byte trie of the pieces, nodes numbered breadth-first so each node's children are consecutive:
  // node j is reached by byte label_[j]; the children of node i are [first_child_[i], first_child_[i + 1]);
  // node_id_[j] is the id of the piece ending at node j, or -1. root_child_ indexes the root's children by byte.
  std::vector<unsigned char> label_;
  std::vector<std::int32_t> node_id_;
  std::vector<std::int32_t> first_child_;
  std::int32_t root_child_[256];
};

}  // namespace ferry::text::detail
