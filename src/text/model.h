// Model: the "model" of tokenizer.json, which turns one pre-tokenized word into token ids, and the
// vocabulary behind it. Hugging Face: the `Model` trait of tokenizers/src/tokenizer/mod.rs. Implemented
// by Bpe (bpe.h) and Unigram (unigram.h).
//
// Thread-safety: every method may be called from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::text::detail {

class Model {
 public:
  virtual ~Model() = default;

  /// Appends the ids of `word` (one pre-tokenized piece, valid UTF-8) to `out`. Throws ferry::Error where
  /// Hugging Face raises (e.g. an unknown character with no unk token to stand for it).
  virtual void tokenize(std::string_view word, std::vector<std::int32_t>& out) const = 0;

  virtual std::optional<std::int32_t> token_to_id(std::string_view token) const = 0;
  /// The token of `id`, or nullptr when the model has no such id.
  virtual const std::string* id_to_token(std::int32_t id) const = 0;
  /// Number of vocabulary entries (what HF calls the model's vocab size).
  virtual std::size_t vocab_size() const = 0;
  /// The largest id in the vocabulary (-1 when empty).
  virtual std::int32_t max_id() const = 0;
};

}  // namespace ferry::text::detail
