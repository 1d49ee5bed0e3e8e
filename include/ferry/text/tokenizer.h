// ferry::text::Tokenizer — the tokenizer.json of a Hugging Face model folder: text to token ids and back.
//
// Hugging Face: tokenizers.Tokenizer (Rust crate `tokenizers`, tokenizer/mod.rs); transformers'
// PreTrainedTokenizerFast wraps the same object. ferry reads the same file and reproduces its encode and
// decode exactly (tests compare against the `tokenizers` package itself) for the components ferry
// supports:
//   normalizer:     NFC NFD NFKC NFKD Lowercase Strip StripAccents Replace Prepend ByteLevel Sequence
//   pre_tokenizer:  ByteLevel Split Metaspace Digits WhitespaceSplit Sequence
//   model:          BPE (byte_fallback, unk_token, fuse_unk, ignore_merges, continuing_subword_prefix,
//                   end_of_word_suffix; dropout must be null)
//   post_processor: TemplateProcessing ByteLevel RobertaProcessing BertProcessing Sequence
//   decoder:        ByteLevel Metaspace Replace ByteFallback Fuse Strip BPEDecoder WordPiece Sequence
// A valid file using anything else (a WordPiece or Unigram model, BertNormalizer, ...) is refused with a
// ferry::Error naming the component; a malformed file with one naming the field. Truncation and padding
// settings are ignored with a logged warning: they shape batches, not ids.
//
// Input text that is not valid UTF-8 is repaired first: each maximal invalid byte sequence becomes
// U+FFFD, as Rust's String::from_utf8_lossy and Python's bytes.decode("utf-8", "replace") do.
//
// A Tokenizer is immutable after loading; copies share state; every method may be called from several
// threads at once.
//
// Example:
//   auto tok = ferry::text::Tokenizer::from_file("Llama-3.2-1B/tokenizer.json");
//   std::vector<ferry::text::TokenId> ids = tok.encode("Hello world");  // with <|begin_of_text|>
//   std::string text = tok.decode(ids, /*skip_special_tokens=*/true);  // "Hello world"
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::text {

/// A token id, as models index their embedding tables.
using TokenId = std::int32_t;

/// One entry of tokenizer.json's "added_tokens". Hugging Face: tokenizers.AddedToken.
struct AddedToken {
  std::string content;
  TokenId id = 0;
  bool single_word = false;  ///< match only when not touching a word character on either side
  bool lstrip = false;       ///< the match also swallows whitespace on its left
  bool rstrip = false;       ///< the match also swallows whitespace on its right
  bool normalized = true;    ///< matched in the normalized text rather than the raw text
  bool special = false;      ///< dropped by decode(..., skip_special_tokens=true)
};

class Tokenizer {
 public:
  /// Reads a tokenizer.json file. Throws ferry::Error naming the file and field on any problem.
  static Tokenizer from_file(const std::filesystem::path& path);
  /// Parses tokenizer.json text; `source` names it in error messages.
  static Tokenizer from_json(std::string_view json, std::string_view source = "tokenizer.json");

  /// Text to ids. add_special_tokens: apply the post-processor's template (e.g. prepend BOS).
  /// Hugging Face: Tokenizer.encode(text, add_special_tokens).ids
  std::vector<TokenId> encode(std::string_view text, bool add_special_tokens = true) const;

  /// encode() of every text, spread over ferry's thread pool (ferry::parallel_for).
  /// Hugging Face: Tokenizer.encode_batch.
  std::vector<std::vector<TokenId>> encode_batch(std::span<const std::string_view> texts,
                                                 bool add_special_tokens = true) const;

  /// Ids to text. Unknown ids are skipped (as HF does). skip_special_tokens: drop added tokens marked
  /// special. Hugging Face: Tokenizer.decode(ids, skip_special_tokens), as of tokenizers 0.23 (added
  /// tokens with normalized=true decode to their normalized spelling; 0.22 used their content).
  std::string decode(std::span<const TokenId> ids, bool skip_special_tokens = false) const;

  /// The id of a token string (added tokens first, then the model vocabulary).
  std::optional<TokenId> token_to_id(std::string_view token) const;
  /// The token string of an id (added tokens first, then the model vocabulary). For an added token with
  /// normalized=true this is its normalized spelling, as in HF tokenizers >= 0.23.
  std::optional<std::string> id_to_token(TokenId id) const;
  /// One past the largest id the tokenizer can produce (model vocabulary and added tokens).
  std::size_t vocab_size() const;
  /// True when `id` is an added token marked special.
  bool is_special(TokenId id) const;
  /// The added tokens in id order, with the ids this tokenizer assigned.
  std::vector<AddedToken> added_tokens() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

/// Incremental decoding for streaming generation: feed ids one at a time, get text as soon as it is
/// final. Never returns half a UTF-8 character (byte-fallback tokens and byte-level pieces are held until
/// their character is complete), and handles decoders whose output for a token depends on its
/// neighbours (Metaspace's leading space, Strip) by decoding a short window of recent ids and emitting
/// only the new suffix. Hugging Face: tokenizers.decoders.DecodeStream (same algorithm, same output).
///
/// Holds a reference to the tokenizer, which must outlive it. Not thread-safe (one per stream).
///
/// Example:
///   ferry::text::DecodeStream stream(tok);
///   for (TokenId id : generated) if (auto piece = stream.step(id)) std::cout << *piece << std::flush;
class DecodeStream {
 public:
  explicit DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  /// The text completed by `id`, or nullopt when `id` does not complete any text yet.
  std::optional<std::string> step(TokenId id);

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::vector<TokenId> ids_;  // the window: ids before prefix_index_ give context, the rest are pending
  std::string prefix_;        // decode of the window's context, already emitted
  std::size_t prefix_index_ = 0;
};

}  // namespace ferry::text
