// Normalizers of tokenizer.json ("normalizer"): rewrite a piece of text before pre-tokenization.
// Hugging Face: tokenizers/src/normalizers. Supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip,
// StripAccents, Replace, Prepend, ByteLevel and Sequence. BertNormalizer, Nmt and Precompiled are valid
// but not supported: loading one throws a ferry::Error naming it.
#pragma once

#include <memory>
#include <string>

#include "text/json_view.h"
#include "text/regex.h"

namespace ferry::text::detail {

/// A Replace/Split "pattern": {"String": "..."} (matched literally) or {"Regex": "..."} (Oniguruma).
Regex parse_pattern(const JsonView& pattern);

/// HF's NormalizedString::replace: every match of `regex` in `text` becomes `content`.
std::string replace_all(const Regex& regex, std::string_view text, std::string_view content);

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  /// Rewrites `text` (valid UTF-8 in, valid UTF-8 out).
  virtual void normalize(std::string& text) const = 0;
};

/// Builds the normalizer described by `json` (an object with a "type").
std::unique_ptr<Normalizer> parse_normalizer(const JsonView& json);

}  // namespace ferry::text::detail
