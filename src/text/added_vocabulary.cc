// AddedVocabulary (see added_vocabulary.h): id assignment and the two-pass extraction of added tokens.
#include "text/added_vocabulary.h"

#include <algorithm>

#include "ferry/core/logging.h"
#include "text/unicode.h"

namespace ferry::text::detail {

// ---- TokenMatcher --------------------------------------------------------------------------------

std::int32_t TokenMatcher::child(std::int32_t node, unsigned char b) const {
  const auto& ch = nodes_[static_cast<std::size_t>(node)].children;
  const auto it = std::lower_bound(ch.begin(), ch.end(), b, [](const auto& e, unsigned char v) { return e.first < v; });
  return it != ch.end() && it->first == b ? it->second : -1;
}

void TokenMatcher::add(std::string_view pattern, std::int32_t id) {
  if (pattern.empty()) return;  // an empty pattern would match everywhere; HF never produces one
  std::int32_t node = 0;
  for (char c : pattern) {
    const auto b = static_cast<unsigned char>(c);
    std::int32_t next = child(node, b);
    if (next < 0) {
      next = static_cast<std::int32_t>(nodes_.size());
      nodes_.emplace_back();
      auto& ch = nodes_[static_cast<std::size_t>(node)].children;
      ch.insert(std::lower_bound(ch.begin(), ch.end(), b, [](const auto& e, unsigned char v) { return e.first < v; }),
                {b, next});
    }
    node = next;
  }
  auto& end = nodes_[static_cast<std::size_t>(node)];
  if (end.id < 0) end.id = id;  // two tokens with the same spelling: the first one listed wins
  first_byte_[static_cast<unsigned char>(pattern[0])] = true;
}

bool TokenMatcher::next(std::string_view text, std::size_t from, std::size_t& begin, std::size_t& end,
                        std::int32_t& id) const {
  for (std::size_t start = from; start < text.size(); ++start) {
    if (!first_byte_[static_cast<unsigned char>(text[start])]) continue;
    std::int32_t node = 0, best = -1;
    std::size_t best_end = 0;
    for (std::size_t i = start; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      if (nodes_[static_cast<std::size_t>(node)].id >= 0) {
        best = nodes_[static_cast<std::size_t>(node)].id;
        best_end = i + 1;
      }
    }
    if (best >= 0) {
      begin = start;
      end = best_end;
      id = best;
      return true;
    }
  }
  return false;
}

// ---- AddedVocabulary -----------------------------------------------------------------------------

namespace {

bool same_token(const AddedToken& a, const AddedToken& b) {
  return a.content == b.content && a.single_word == b.single_word && a.lstrip == b.lstrip && a.rstrip == b.rstrip &&
         a.normalized == b.normalized && a.special == b.special;
}

}  // namespace

void AddedVocabulary::build(const std::optional<JsonView>& list, const Model& model, const Normalizer* normalizer) {
  std::vector<AddedToken> listed;
  std::vector<std::uint32_t> file_ids;
  if (list) {
    for (std::size_t i = 0; i < list->size(); ++i) {
      const JsonView t = (*list)[i];
      t.expect_object();
      AddedToken tok;
      tok.content = t.at("content").as_string();
      file_ids.push_back(t.at("id").as_u32());
      tok.single_word = t.bool_or("single_word", false);
      tok.lstrip = t.bool_or("lstrip", false);
      tok.rstrip = t.bool_or("rstrip", false);
      tok.special = t.bool_or("special", false);
      tok.normalized = t.bool_or("normalized", !tok.special);
      listed.push_back(std::move(tok));
    }
  }
  // HF's AddedVocabulary::add_tokens, called once with the whole list when a tokenizer.json is loaded.
  std::vector<AddedToken> special_order, added_order;
  for (const AddedToken& t : listed) {
    if (t.special && !t.content.empty() && special_.insert(t.content).second) special_order.push_back(t);
  }
  const auto model_size = static_cast<std::int64_t>(model.vocab_size());
  for (std::size_t i = 0; i < listed.size(); ++i) {
    AddedToken t = listed[i];
    if (t.content.empty()) continue;
    if (std::any_of(by_id_.begin(), by_id_.end(), [&](const auto& e) { return same_token(e.second, t); })) continue;
    std::int64_t id;
    if (auto existing = token_to_id(t.content)) {
      id = *existing;
    } else if (auto in_model = model.token_to_id(t.content)) {
      id = *in_model;
    } else if (by_content_.empty()) {
      id = model_size;
    } else {
      std::int64_t max = 0;
      for (const auto& e : by_content_) max = std::max<std::int64_t>(max, e.second);
      id = (max >= model_size || model_size == 0) ? max + 1 : model_size;
    }
    if (id != static_cast<std::int64_t>(file_ids[i])) {
      log_warning("tokenizer.json: added token \"{}\" is listed with id {} but gets id {} (as in Hugging Face tokenizers)",
                  t.content, file_ids[i], id);
    }
    t.id = static_cast<TokenId>(id);
    by_content_[t.content] = t.id;
    by_id_[t.id] = t;
    if (!special_.count(t.content)) added_order.push_back(t);
  }
  // Patterns: special tokens first, then the others, split by whether they match normalized text.
  auto add_pattern = [&](const AddedToken& t) {
    const TokenId id = *token_to_id(t.content);
    if (!t.normalized) {
      raw_matcher_.add(t.content, id);
      return;
    }
    std::string pattern = t.content;
    if (normalizer) normalizer->normalize(pattern);
    if (pattern != t.content && by_id_.at(id).normalized) normalized_form_[id] = pattern;
    normalized_matcher_.add(pattern, id);
  };
  for (const auto& t : special_order) add_pattern(t);
  for (const auto& t : added_order) add_pattern(t);
  // HF tests single_word with Rust's `regex` crate, whose Unicode \w is Alphabetic, Mark, Nd, Pc and
  // Join_Control (not Oniguruma's).
  word_char_ = Regex::pcre2("\\A[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]", "added token single_word check");
}

std::optional<std::int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

const AddedToken* AddedVocabulary::by_id(std::int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

const std::string* AddedVocabulary::decode_form(std::int32_t id) const {
  if (const auto it = normalized_form_.find(id); it != normalized_form_.end()) return &it->second;
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second.content;
}

std::vector<AddedToken> AddedVocabulary::tokens() const {
  std::vector<AddedToken> out;
  for (const auto& e : by_id_) out.push_back(e.second);
  std::sort(out.begin(), out.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  return out;
}

bool AddedVocabulary::is_word_char_at(std::string_view text, std::size_t pos) const {
  if (pos >= text.size()) return false;
  const std::size_t len = utf8_length(static_cast<unsigned char>(text[pos]));
  return word_char_->search(text.substr(pos, len));
}

bool AddedVocabulary::is_word_char_before(std::string_view text, std::size_t pos) const {
  if (pos == 0) return false;
  std::size_t start = pos - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return is_word_char_at(text, start);
}

// HF's AddedVocabulary::find_matches + split_with_indices on one piece.
void AddedVocabulary::find_matches(std::string_view text, const TokenMatcher& matcher, const Piece& parent,
                                   std::vector<Piece>& out) const {
  if (matcher.empty()) {
    out.push_back(parent);
    return;
  }
  std::size_t start_offset = 0, from = 0, begin = 0, end = 0;
  std::int32_t id = -1;
  while (matcher.next(text, from, begin, end, id)) {
    from = end;
    const AddedToken& tok = by_id_.at(id);
    if (tok.single_word && (is_word_char_before(text, begin) || is_word_char_at(text, end))) continue;
    if (tok.lstrip) {
      std::size_t s = begin;
      while (s > 0) {  // walk back over whitespace characters
        std::size_t c = s - 1;
        while (c > 0 && (static_cast<unsigned char>(text[c]) & 0xC0) == 0x80) --c;
        std::size_t k = c;
        if (!is_whitespace(next_code_point(text, k))) break;
        s = c;
      }
      begin = std::max(s, start_offset);
    }
    if (tok.rstrip) {
      while (end < text.size()) {
        std::size_t k = end;
        if (!is_whitespace(next_code_point(text, k))) break;
        end = k;
      }
    }
    if (start_offset < begin) out.push_back(sub_piece(parent, start_offset, begin));
    Piece claimed = sub_piece(parent, begin, end);
    claimed.token = id;
    out.push_back(std::move(claimed));
    start_offset = end;
  }
  if (start_offset != text.size()) out.push_back(sub_piece(parent, start_offset, text.size()));
}

void AddedVocabulary::extract_and_normalize(std::string_view text, const Normalizer* normalizer,
                                            std::vector<Piece>& out) const {
  Piece whole;
  whole.text = std::string(text);
  std::vector<Piece> first;
  find_matches(text, raw_matcher_, whole, first);
  for (Piece& p : first) {
    if (p.token >= 0) {
      out.push_back(std::move(p));
      continue;
    }
    if (normalizer) {
      std::string n = p.text;
      // Leading characters removed: HF's normalized piece starts where its first character came from.
      if (!normalizer->normalize(n)) p.original_start += 1;
      if (n != p.text) p.aligned = false;
      p.text = std::move(n);
    }
    const std::size_t before = out.size();
    find_matches(p.text, normalized_matcher_, p, out);
    // Drop empty pieces (HF's PreTokenizedString::split does).
    out.erase(std::remove_if(out.begin() + static_cast<std::ptrdiff_t>(before), out.end(),
                             [](const Piece& q) { return q.token < 0 && q.text.empty(); }),
              out.end());
  }
}

}  // namespace ferry::text::detail
