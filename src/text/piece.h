// Piece: one span of the text as it moves through the tokenizer pipeline (added-token extraction,
// normalizer, pre-tokenizer, model). Mirrors the `Split` of Hugging Face's PreTokenizedString, keeping
// only what ids depend on: the current text, whether an added token already claimed it, and where the
// piece starts in the original input (Metaspace's prepend_scheme "first" prepends only to the piece that
// starts at offset 0).
//
// Offsets are exact while a piece is an unmodified slice of the input (`aligned`). A piece whose
// normalizer removed its leading characters counts as starting one byte later (HF: where its first
// character came from; see Normalizer::normalize). Once a normalizer has rewritten it, a sub-piece that
// starts at byte 0 keeps the parent's start and any other sub-piece is treated as starting after it;
// HF would consult per-character alignments instead, which differs only for normalizers that delete or
// prepend characters followed by a splitting pre-tokenizer and a "first" Metaspace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ferry::text::detail {

struct Piece {
  std::string text;
  std::size_t original_start = 0;  ///< byte offset of the piece in the original input
  bool aligned = true;             ///< text is still a byte-for-byte slice of the input
  std::int32_t token = -1;         ///< >= 0 once an added token has claimed this piece
};

/// The sub-piece text[begin, end) of `parent`.
inline Piece sub_piece(const Piece& parent, std::size_t begin, std::size_t end) {
  Piece p;
  p.text = parent.text.substr(begin, end - begin);
  p.aligned = parent.aligned;
  p.original_start = parent.aligned || begin == 0 ? parent.original_start + begin : parent.original_start + 1 + begin;
  return p;
}

/// Span of a pattern search: [first, second) plus whether it is a match (HF's Pattern::find_matches).
struct PatternSpan {
  std::size_t begin, end;
  bool is_match;
};

/// How a split treats the matched delimiters (HF's SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

/// Cuts `piece` along `spans` (which cover it contiguously) according to `behavior`, appending the
/// non-empty sub-pieces to `out` (HF's NormalizedString::split followed by PreTokenizedString's
/// dropping of empty splits).
void split_piece(const Piece& piece, const std::vector<PatternSpan>& spans, SplitBehavior behavior,
                 std::vector<Piece>& out);

/// Applies `fn(const Piece&, std::vector<Piece>& out)` to every piece not yet claimed by a token,
/// replacing it by what fn appends (empty results are dropped); claimed pieces pass through unchanged.
template <class Fn>
void split_pieces(std::vector<Piece>& pieces, Fn&& fn) {
  std::vector<Piece> next;
  next.reserve(pieces.size() * 2);
  for (Piece& p : pieces) {
    if (p.token >= 0) {
      next.push_back(std::move(p));
      continue;
    }
    const std::size_t before = next.size();
    fn(p, next);
    std::size_t kept = before;
    for (std::size_t i = before; i < next.size(); ++i) {
      if (next[i].token >= 0 || !next[i].text.empty()) {
        if (kept != i) next[kept] = std::move(next[i]);
        ++kept;
      }
    }
    next.resize(kept);
  }
  pieces = std::move(next);
}

}  // namespace ferry::text::detail
