// Pre-tokenizers (see pre_tokenizer.h), plus split_piece, the delimiter logic they share (HF's
// NormalizedString::split and Pattern::find_matches).
#include "text/pre_tokenizer.h"

#include <algorithm>

#include "text/byte_level.h"
#include "text/normalizer.h"
#include "text/regex.h"
#include "text/unicode.h"

namespace ferry::text::detail {

void split_piece(const Piece& piece, const std::vector<PatternSpan>& spans, SplitBehavior behavior,
                 std::vector<Piece>& out) {
  struct Cut {
    std::size_t begin, end;
    bool remove;
  };
  std::vector<Cut> cuts;
  cuts.reserve(spans.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const auto& s : spans) cuts.push_back({s.begin, s.end, false});
      break;
    case SplitBehavior::Removed:
      for (const auto& s : spans) cuts.push_back({s.begin, s.end, s.is_match});
      break;
    case SplitBehavior::Contiguous:
      for (const auto& s : spans) {
        if (s.is_match == previous_match && !cuts.empty()) cuts.back().end = s.end;
        else cuts.push_back({s.begin, s.end, false});
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const auto& s : spans) {
        if (s.is_match && !previous_match && !cuts.empty()) cuts.back().end = s.end;
        else cuts.push_back({s.begin, s.end, false});
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !cuts.empty()) cuts.back().begin = it->begin;
        else cuts.push_back({it->begin, it->end, false});
        previous_match = it->is_match;
      }
      std::reverse(cuts.begin(), cuts.end());
      break;
  }
  for (const Cut& c : cuts) {
    if (!c.remove && c.end > c.begin) out.push_back(sub_piece(piece, c.begin, c.end));
  }
}

namespace {

using Matches = std::vector<std::pair<std::size_t, std::size_t>>;

// HF's Pattern::find_matches for a regex: matches and the gaps between them, covering the text.
void regex_spans(const Regex& regex, std::string_view text, bool invert, std::vector<PatternSpan>& spans) {
  spans.clear();
  if (text.empty()) {
    spans.push_back({0, 0, invert});
    return;
  }
  thread_local Matches matches;
  matches.clear();
  regex.find_all(text, matches);
  std::size_t prev = 0;
  for (const auto& [s, e] : matches) {
    if (prev != s) spans.push_back({prev, s, invert});
    spans.push_back({s, e, !invert});
    prev = e;
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), invert});
}

// HF's Pattern::find_matches for a character predicate.
template <class Pred>
void char_spans(std::string_view text, Pred pred, std::vector<PatternSpan>& spans) {
  spans.clear();
  if (text.empty()) {
    spans.push_back({0, 0, false});
    return;
  }
  std::size_t last = 0, i = 0;
  while (i < text.size()) {
    const std::size_t b = i;
    if (pred(next_code_point(text, i))) {
      if (last < b) spans.push_back({last, b, false});
      spans.push_back({b, i, true});
      last = i;
    }
  }
  if (text.size() > last) spans.push_back({last, text.size(), false});
}

// Rewrites a piece's text in place, keeping its offset bookkeeping honest.
void set_text(Piece& p, std::string text) {
  if (text != p.text) p.aligned = false;
  p.text = std::move(text);
}

// The GPT-2 pre-tokenization regex (OpenAI gpt-2 encoder.py; HF pre_tokenizers/byte_level.rs).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex), regex_(kGpt2Pattern, "ByteLevel") {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<PatternSpan> spans;
    split_pieces(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      Piece q = p;
      if (add_prefix_space_ && !q.text.empty() && q.text.front() != ' ') set_text(q, " " + q.text);
      if (!use_regex_) {
        out.push_back(std::move(q));
        return;
      }
      regex_spans(regex_, q.text, false, spans);
      split_piece(q, spans, SplitBehavior::Isolated, out);
    });
    for (Piece& p : pieces) {
      if (p.token >= 0) continue;
      std::string mapped;
      byte_level_encode(p.text, mapped);
      set_text(p, std::move(mapped));
    }
  }

 private:
  bool add_prefix_space_, use_regex_;
  Regex regex_;
};

class Split final : public PreTokenizer {
 public:
  Split(Regex regex, SplitBehavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<PatternSpan> spans;
    split_pieces(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      regex_spans(regex_, p.text, invert_, spans);
      split_piece(p, spans, behavior_, out);
    });
  }

 private:
  Regex regex_;
  SplitBehavior behavior_;
  bool invert_;
};

enum class PrependScheme { First, Never, Always };

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {
    std::size_t i = 0;
    replacement_cp_ = next_code_point(replacement_, i);
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<PatternSpan> spans;
    split_pieces(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      Piece q = p;
      std::string text;
      text.reserve(q.text.size() + replacement_.size());
      for (char c : q.text) {
        if (c == ' ') text += replacement_;
        else text.push_back(c);
      }
      const bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
      if (!text.empty() && !starts &&
          (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && q.original_start == 0))) {
        text.insert(0, replacement_);
      }
      set_text(q, std::move(text));
      if (!split_) {
        out.push_back(std::move(q));
        return;
      }
      char_spans(q.text, [&](char32_t c) { return c == replacement_cp_; }, spans);
      split_piece(q, spans, SplitBehavior::MergedWithNext, out);
    });
  }

 private:
  std::string replacement_;
  char32_t replacement_cp_;
  PrependScheme scheme_;
  bool split_;
};

// Splits on predicate characters with a fixed behaviour (Digits, WhitespaceSplit).
template <class Pred>
class CharSplit final : public PreTokenizer {
 public:
  CharSplit(Pred pred, SplitBehavior behavior) : pred_(pred), behavior_(behavior) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<PatternSpan> spans;
    split_pieces(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      char_spans(p.text, pred_, spans);
      split_piece(p, spans, behavior_, out);
    });
  }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};

template <class Pred>
std::unique_ptr<PreTokenizer> make_char_split(Pred pred, SplitBehavior behavior) {
  return std::make_unique<CharSplit<Pred>>(pred, behavior);
}

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& s : steps_) s->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

PrependScheme parse_prepend_scheme(const JsonView& json) {
  const std::string s = json.as_string();
  if (s == "first") return PrependScheme::First;
  if (s == "never") return PrependScheme::Never;
  if (s == "always") return PrependScheme::Always;
  json.fail("unknown prepend_scheme \"" + s + "\"", "expected \"first\", \"never\" or \"always\"");
}

std::unique_ptr<PreTokenizer> parse_metaspace(const JsonView& json) {
  PrependScheme scheme = PrependScheme::Always;
  if (auto v = json.get("prepend_scheme")) scheme = parse_prepend_scheme(*v);
  // Older files say add_prefix_space instead; false means "never" and must not contradict the scheme.
  if (auto v = json.get("add_prefix_space"); v && !v->as_bool()) {
    if (json.has("prepend_scheme") && scheme != PrependScheme::Never) {
      v->fail("add_prefix_space=false contradicts prepend_scheme");
    }
    scheme = PrependScheme::Never;
  }
  return std::make_unique<Metaspace>(json.at("replacement").as_char(), scheme, json.bool_or("split", true));
}

}  // namespace

SplitBehavior parse_split_behavior(const JsonView& json) {
  const std::string s = json.as_string();
  if (s == "Removed") return SplitBehavior::Removed;
  if (s == "Isolated") return SplitBehavior::Isolated;
  if (s == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (s == "Contiguous") return SplitBehavior::Contiguous;
  json.fail("unknown split behavior \"" + s + "\"",
            "expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
}

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const JsonView& json) {
  json.expect_object();
  const std::string type = json.at("type").as_string();
  if (type == "ByteLevel") {
    const bool add_prefix_space = json.at("add_prefix_space").as_bool();
    json.at("trim_offsets").as_bool();  // required by HF although it only affects offsets
    return std::make_unique<ByteLevel>(add_prefix_space, json.bool_or("use_regex", true));
  }
  if (type == "Split") {
    Regex pattern = parse_pattern(json.at("pattern"));
    const SplitBehavior behavior = parse_split_behavior(json.at("behavior"));
    const bool invert = json.at("invert").as_bool();
    return std::make_unique<Split>(std::move(pattern), behavior, invert);
  }
  if (type == "Metaspace") return parse_metaspace(json);
  if (type == "Digits") {
    const bool individual = json.at("individual_digits").as_bool();
    return make_char_split(is_numeric, individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
  }
  if (type == "WhitespaceSplit") return make_char_split(is_whitespace, SplitBehavior::Removed);
  if (type == "Sequence") {
    const JsonView list = json.at("pretokenizers");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (std::size_t i = 0; i < list.size(); ++i) steps.push_back(parse_pre_tokenizer(list[i]));
    return std::make_unique<Sequence>(std::move(steps));
  }
  if (type == "BertPreTokenizer" || type == "Whitespace" || type == "Delimiter" || type == "Punctuation" ||
      type == "UnicodeScripts" || type == "FixedLength") {
    json.at("type").fail("the " + type + " pre-tokenizer is not supported by ferry",
                         "ferry supports ByteLevel, Split, Metaspace, Digits, WhitespaceSplit and Sequence");
  }
  json.at("type").fail("unknown pre-tokenizer type \"" + type + "\"");
}

}  // namespace ferry::text::detail
