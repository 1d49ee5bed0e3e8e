// Normalizers of tokenizer.json ("normalizer"): rewrite a piece of text before pre-tokenization.
// Hugging Face: tokenizers/src/normalizers. Supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip,
// StripAccents, Replace, Prepend, ByteLevel, Precompiled (precompiled.h) and Sequence. BertNormalizer and
// Nmt are valid but not supported: loading one throws a ferry::Error naming it.
#pragma once

#include <memory>
#include <string>

#include "text/json_view.h"
#include "text/regex.h"

namespace ferry::text::detail {

/// A Replace/Split "pattern": {"String": "..."} (matched literally) or {"Regex": "..."} (Oniguruma).
Regex parse_pattern(const JsonView& pattern);

/// HF's NormalizedString::replace: every match of `regex` in `text` becomes `content`. When `keeps_start` is
/// given, it is set as Normalizer::normalize's result says.
std::string replace_all(const Regex& regex, std::string_view text, std::string_view content,
                        bool* keeps_start = nullptr);

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  /// Rewrites `text` (valid UTF-8 in, valid UTF-8 out). Returns false when the output no longer starts where
  /// the input did: leading characters were removed, so that in HF's alignments the first character of the
  /// output comes from further in the input (HF's NormalizedString then starts at a later original offset,
  /// which Metaspace's prepend_scheme "first" looks at). Tracked only as far as that needs: each step that
  /// drops its input's first character clears it, and nothing sets it again.
  virtual bool normalize(std::string& text) const = 0;
};

/// Builds the normalizer described by `json` (an object with a "type").
std::unique_ptr<Normalizer> parse_normalizer(const JsonView& json);

}  // namespace ferry::text::detail
