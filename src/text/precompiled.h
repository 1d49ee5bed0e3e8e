// Precompiled: the normalizer that carries a SentencePiece model's own normalization rules ("nmt_nfkc" and
// the like) as its `precompiled_charsmap`, as T5, mT5, ALBERT, XLM-R and other converted SentencePiece files
// do. Hugging Face: tokenizers/src/normalizers/precompiled.rs over the spm_precompiled crate.
//
// The charsmap (base64 in tokenizer.json) is SentencePiece's blob: a little-endian u32 byte size of the
// trie, the trie as a Darts double array of u32 units, then the replacement strings, each ended by '\0'. A
// trie entry maps a UTF-8 key to the offset of its replacement. The text is rewritten as spm_precompiled
// does it: each extended grapheme cluster shorter than 6 bytes is replaced whole when some entry is a prefix
// of it (the shortest such entry wins, and whatever of the cluster follows that prefix is dropped);
// otherwise each character is replaced on its own when an entry is a prefix of it, else kept. A '\0' in the
// text ends the search there.
//
// Differences from HF, for files HF cannot use: an empty charsmap (or one whose trie is empty) is the
// identity here, as in SentencePiece, where HF refuses the file (or panics on the first text); a trie
// pointing outside itself throws ferry::Error when the text reaches it, where HF panics.
#pragma once

#include <memory>

#include "text/json_view.h"
#include "text/normalizer.h"

namespace ferry::text::detail {

/// Builds a Precompiled normalizer from its tokenizer.json object ({"type": "Precompiled",
/// "precompiled_charsmap": "<base64>"}). Throws ferry::Error naming the field on bad base64 or a truncated
/// or otherwise unreadable charsmap.
std::unique_ptr<Normalizer> parse_precompiled(const JsonView& json);

/// Standard base64 (RFC 4648 alphabet, '=' padding required, unused bits zero) as Rust's base64 crate's
/// STANDARD engine decodes it. Returns false and says why on malformed input.
bool decode_base64(std::string_view text, std::string& out, std::string& why);

}  // namespace ferry::text::detail
