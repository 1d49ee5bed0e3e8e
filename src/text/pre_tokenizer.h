// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): cut normalized text into the words the model
// encodes one by one. Hugging Face: tokenizers/src/pre_tokenizers. Supported: ByteLevel (GPT-2 regex),
// Split (string or regex pattern, every delimiter behaviour, invert), Metaspace, Digits,
// WhitespaceSplit and Sequence. BertPreTokenizer, Whitespace, Delimiter, Punctuation, UnicodeScripts and
// FixedLength are valid but not supported: loading one throws a ferry::Error naming it.
#pragma once

#include <memory>
#include <vector>

#include "text/json_view.h"
#include "text/piece.h"

namespace ferry::text::detail {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  /// Splits every piece not claimed by an added token.
  virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
};

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const JsonView& json);

/// "Isolated", "Removed", ... as spelled in tokenizer.json.
SplitBehavior parse_split_behavior(const JsonView& json);

}  // namespace ferry::text::detail
