// ferry::text::Tokenizer — the tokenizer.json of a Hugging Face model folder: text to token ids and back.
//
// Hugging Face: tokenizers.Tokenizer (Rust crate `tokenizers`, tokenizer/mod.rs); transformers'
// PreTrainedTokenizerFast wraps the same object. ferry reads the same file and reproduces its encode and
// decode exactly (tests compare against the `tokenizers` package itself) for the components ferry
// supports:
//   normalizer:     NFC NFD NFKC NFKD Lowercase Strip StripAccents Replace Prepend ByteLevel Precompiled
//                   Sequence
//   pre_tokenizer:  ByteLevel Split Metaspace Digits WhitespaceSplit Sequence
//   model:          BPE (byte_fallback, unk_token, fuse_unk, ignore_merges, continuing_subword_prefix,
//                   end_of_word_suffix; dropout must be null), Unigram (unk_id, byte_fallback)
//   post_processor: TemplateProcessing ByteLevel RobertaProcessing BertProcessing Sequence
//   decoder:        ByteLevel Metaspace Replace ByteFallback Fuse Strip BPEDecoder WordPiece Sequence
// A valid file using anything else (a WordPiece model, BertNormalizer, ...) is refused with a
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
/// final, then call finish() once for whatever was still held back. The pieces, concatenated with
/// finish(), always equal decode(all ids) — for every decoder ferry supports, whatever the ids — and
/// step() never throws on odd ids.
///
/// Text is held back while it could still change:
///   - a trailing run of byte-fallback tokens (<0xNN>): ByteFallback turns the whole run into U+FFFD, one
///     per byte, when the run is not valid UTF-8, so even a run that is valid so far ("i") may decode
///     differently once the run ends. It is released when a token that is not a byte piece arrives (ids
///     that decode() drops, unknown or skipped special ones, do not end a run).
///   - text ending in U+FFFD: an incomplete UTF-8 sequence of byte-level pieces.
/// Decoders whose output for a token depends on its neighbours (Metaspace's leading space, Strip) are
/// handled as in Hugging Face: a short window of recent ids is decoded and only the new suffix emitted.
/// A decoder whose output is not prefix-stable even so (rare: e.g. a BPEDecoder suffix inside a piece)
/// makes the stream fall back to decoding every id so far at each step, holding text until the decode
/// again extends what was emitted.
///
/// Hugging Face: tokenizers.decoders.DecodeStream (the same chunks for ids without byte-fallback pieces;
/// HF emits byte runs as soon as they are valid and raises where its output would change, ferry waits
/// for the run to end and never raises), plus transformers' TextStreamer.end() as finish().
///
/// Holds a reference to the tokenizer, which must outlive it. Not thread-safe (one per stream).
///
/// Example:
///   ferry::text::DecodeStream stream(tok);
///   for (TokenId id : generated) if (auto piece = stream.step(id)) std::cout << *piece << std::flush;
///   std::cout << stream.finish();
class DecodeStream {
 public:
  explicit DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  /// The text completed by `id`, or nullopt when `id` does not complete any text yet.
  std::optional<std::string> step(TokenId id);

  /// The text still held back (a byte run or an incomplete UTF-8 sequence at the end, which then
  /// decode as decode() does: invalid bytes become U+FFFD). The stream may go on after it (further
  /// pieces continue the same text), but text finish() returned is final even if later ids would have
  /// decoded it differently.
  std::string finish();

  /// All text returned so far by step() and finish().
  const std::string& emitted() const { return emitted_; }

 private:
  std::optional<std::string> step_window();
  std::optional<std::string> step_full();
  std::size_t settled_end(std::size_t floor) const;
  std::string decode(std::size_t begin, std::size_t end) const;
  std::string emit(std::string text);

  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  // Every id of the stream and its kind: a byte-fallback piece, an id decode() drops (unknown, or special and
  // skipped), or text. Indices below are into these.
  enum class Kind : unsigned char { Byte, Dropped, Text };
  std::vector<TokenId> ids_;
  std::vector<Kind> kind_;
  std::size_t start_ = 0;        // first id since the last finish()
  std::size_t window_ = 0;       // first id of the decode window: [window_, context_end_) is context
  std::size_t context_end_ = 0;  // ids from here on are pending (not yet emitted)
  std::string prefix_;           // decode of the context, already emitted
  std::string emitted_;          // everything returned so far
  std::size_t emitted_at_start_ = 0;  // emitted_.size() at start_
  bool full_ = false;            // fallback: decode every id since start_ at each step
};

}  // namespace ferry::text
