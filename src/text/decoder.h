// Decoders of tokenizer.json ("decoder"): turn the token strings of decoded ids back into text. Each
// stage maps a list of strings to a list of strings ("decode_chain"); the results are concatenated at the
// end. Hugging Face: tokenizers/src/decoders. Supported: ByteLevel, Metaspace, Replace, ByteFallback,
// Fuse, Strip, BPEDecoder, WordPiece and Sequence; CTC is valid but not supported.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "text/json_view.h"

namespace ferry::text::detail {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Decoder> parse_decoder(const JsonView& json);

}  // namespace ferry::text::detail
