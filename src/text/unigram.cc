// Unigram (see unigram.h): the vocabulary of [piece, score] pairs, its byte trie, and HF's
// Unigram::encode_optimized Viterbi plus Unigram::tokenize's unknown-run handling.
#include "text/unigram.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>

#include "ferry/core/error.h"
#include "text/unicode.h"

namespace ferry::text::detail {

// ---- Scores as serde_json parses them --------------------------------------------------------------

namespace {

// serde_json's POW10: 1e0 ... 1e308, each correctly rounded.
const std::array<double, 309>& pow10_table() {
  static const std::array<double, 309> table = [] {
    std::array<double, 309> t{};
    for (int i = 0; i < 309; ++i) {
      const std::string s = "1e" + std::to_string(i);
      std::from_chars(s.data(), s.data() + s.size(), t[static_cast<std::size_t>(i)]);
    }
    return t;
  }();
  return table;
}

}  // namespace

double serde_json_f64(const JsonView& number) {
  const nlohmann::json& j = number.raw();
  if (j.is_number_unsigned()) return static_cast<double>(j.get<std::uint64_t>());
  if (j.is_number_integer()) return static_cast<double>(j.get<std::int64_t>());
  if (!j.is_number_float()) number.fail(std::string("expected a number, got ") + j.type_name());
  const double d = j.get<double>();
  if (!std::isfinite(d)) number.fail("number out of range");
  // nlohmann's value is the correctly rounded one; its shortest round-trip digits are the digits the file
  // holds (Python's json and serde_json both write shortest digits), which serde_json then turns into an
  // f64 as significand * 10^exponent in two roundings.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), std::fabs(d), std::chars_format::scientific);
  const std::string_view text(buf, static_cast<std::size_t>(res.ptr - buf));  // "D[.DDD]e[+-]XX"
  const std::size_t e = text.find('e');
  std::uint64_t significand = 0;
  int fraction_digits = 0;
  bool after_point = false;
  for (std::size_t i = 0; i < e; ++i) {
    if (text[i] == '.') {
      after_point = true;
      continue;
    }
    significand = significand * 10 + static_cast<std::uint64_t>(text[i] - '0');
    if (after_point) ++fraction_digits;
  }
  int exponent = 0;
  std::from_chars(text.data() + e + (text[e + 1] == '+' ? 2 : 1), text.data() + text.size(), exponent);
  exponent -= fraction_digits;
  double f = static_cast<double>(significand);
  const auto& pow10 = pow10_table();
  for (;;) {  // serde_json's f64_from_parts (without the float_roundtrip feature)
    const int magnitude = exponent < 0 ? -exponent : exponent;
    if (magnitude < static_cast<int>(pow10.size())) {
      if (exponent >= 0) f *= pow10[static_cast<std::size_t>(magnitude)];
      else f /= pow10[static_cast<std::size_t>(magnitude)];
      break;
    }
    if (f == 0.0) break;
    if (exponent >= 0) number.fail("number out of range");
    f /= 1e308;
    exponent += 308;
  }
  if (!std::isfinite(f)) number.fail("number out of range");
  return std::signbit(d) ? -f : f;
}

// ---- Loading ---------------------------------------------------------------------------------------

std::unique_ptr<Unigram> Unigram::parse(const JsonView& model) {
  auto u = std::make_unique<Unigram>();
  const JsonView vocab = model.at("vocab");
  vocab.expect_array();
  const std::size_t n = vocab.size();
  if (n > 0x7FFFFFFFu) vocab.fail("the vocabulary has too many pieces");
  u->pieces_.reserve(n);
  u->scores_.reserve(n);
  u->ids_.reserve(n);
  double min_score = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < n; ++i) {
    const JsonView entry = vocab[i];
    if (!entry.raw().is_array() || entry.size() != 2) {
      entry.fail("expected a [piece, score] pair", "Unigram vocabularies list [\"piece\", -1.5] pairs in id order");
    }
    std::string piece = entry[0].as_string();
    if (!is_valid_utf8(piece)) entry[0].fail("piece is not valid UTF-8");
    const double score = serde_json_f64(entry[1]);
    min_score = std::min(min_score, score);
    u->ids_.insert_or_assign(piece, static_cast<std::int32_t>(i));
    u->pieces_.push_back(std::move(piece));
    u->scores_.push_back(score);
  }
  if (auto v = model.get("unk_id")) {
    const std::uint64_t unk = v->as_u64();
    if (n == 0) {
      v->fail("unk_id is set but the vocabulary is empty", "a Unigram vocabulary needs at least its unknown piece");
    }
    if (unk >= n) {
      v->fail("unk_id " + std::to_string(unk) + " is out of range: the vocabulary has " + std::to_string(n) +
              " pieces");
    }
    u->unk_id_ = static_cast<std::int32_t>(unk);
  }
  u->byte_fallback_ = model.bool_or("byte_fallback", false);
  u->unk_score_ = min_score - 10.0;  // HF's K_UNK_PENALTY
  for (int b = 0; b < 256; ++b) {
    static const char* kHex = "0123456789ABCDEF";
    const std::string name = std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
    const auto it = u->ids_.find(name);
    u->byte_ids_[b] = it == u->ids_.end() ? -1 : it->second;
  }
  u->build_trie();
  return u;
}

void Unigram::build_trie() {
  // Distinct non-empty pieces in byte order, each with the id a lookup gives (its last occurrence).
  std::vector<std::pair<std::string_view, std::int32_t>> keys;
  keys.reserve(ids_.size());
  for (const auto& [piece, id] : ids_) {
    if (!piece.empty()) keys.emplace_back(piece, id);
  }
  std::sort(keys.begin(), keys.end());
  // Breadth-first: each queued node covers the keys [lo, hi) that share its `depth`-byte prefix.
  struct Pending {
    std::size_t lo, hi, depth;
  };
  std::vector<Pending> queue{{0, keys.size(), 0}};
  label_.assign(1, 0);
  node_id_.assign(1, -1);
  first_child_.clear();
  for (std::size_t node = 0; node < queue.size(); ++node) {
    auto [lo, hi, depth] = queue[node];
    first_child_.push_back(static_cast<std::int32_t>(label_.size()));
    if (lo < hi && keys[lo].first.size() == depth) node_id_[node] = keys[lo++].second;
    while (lo < hi) {
      const auto byte = static_cast<unsigned char>(keys[lo].first[depth]);
      std::size_t end = lo;
      while (end < hi && static_cast<unsigned char>(keys[end].first[depth]) == byte) ++end;
      label_.push_back(byte);
      node_id_.push_back(-1);
      queue.push_back({lo, end, depth + 1});
      lo = end;
    }
  }
  first_child_.push_back(static_cast<std::int32_t>(label_.size()));
  std::fill(std::begin(root_child_), std::end(root_child_), -1);
  for (std::int32_t c = first_child_[0]; c < first_child_[1]; ++c) root_child_[label_[static_cast<std::size_t>(c)]] = c;
}

std::int32_t Unigram::child(std::int32_t node, unsigned char byte) const {
  if (node == 0) return root_child_[byte];
  const auto begin = label_.begin() + first_child_[static_cast<std::size_t>(node)];
  const auto end = label_.begin() + first_child_[static_cast<std::size_t>(node) + 1];
  const auto it = std::lower_bound(begin, end, byte);
  return it != end && *it == byte ? static_cast<std::int32_t>(it - label_.begin()) : -1;
}

std::optional<std::int32_t> Unigram::token_to_id(std::string_view token) const {
  const auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string* Unigram::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= pieces_.size()) return nullptr;
  return &pieces_[static_cast<std::size_t>(id)];
}

// ---- Encoding --------------------------------------------------------------------------------------

namespace {

[[noreturn]] void missing_unk() {
  throw Error("the text has a character that no Unigram piece covers and the model has no unk_id",
              "tokenizer.json: model.unk_id", "Hugging Face fails the same way (\"unk_id is missing\")");
}

}  // namespace

void Unigram::push_unknown(std::string_view run, std::vector<std::int32_t>& out) const {
  if (const auto it = ids_.find(run); it != ids_.end()) {  // e.g. the text "<unk>" itself
    out.push_back(it->second);
    return;
  }
  if (byte_fallback_ &&
      std::all_of(run.begin(), run.end(), [&](char c) { return byte_ids_[static_cast<unsigned char>(c)] >= 0; })) {
    for (char c : run) out.push_back(byte_ids_[static_cast<unsigned char>(c)]);
    return;
  }
  if (!unk_id_) missing_unk();
  out.push_back(*unk_id_);
}

void Unigram::tokenize(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  struct Best {
    double score;        // of the best path ending here
    std::int32_t id;     // its last piece
    std::int32_t start;  // where that piece starts; -1 while no path ends here
  };
  thread_local std::vector<Best> best;
  const std::size_t n = word.size();
  best.assign(n + 1, Best{0.0, 0, -1});
  for (std::size_t start = 0; start < n;) {
    const double base = best[start].score;
    const std::size_t char_len = utf8_length(static_cast<unsigned char>(word[start]));
    bool has_single = false;
    std::int32_t node = 0;
    for (std::size_t k = start; k < n; ++k) {
      node = child(node, static_cast<unsigned char>(word[k]));
      if (node < 0) break;
      const std::int32_t id = node_id_[static_cast<std::size_t>(node)];
      if (id < 0) continue;
      const double candidate = scores_[static_cast<std::size_t>(id)] + base;
      Best& target = best[k + 1];
      if (target.start < 0 || candidate > target.score) target = {candidate, id, static_cast<std::int32_t>(start)};
      if (k + 1 - start == char_len) has_single = true;
    }
    if (!has_single) {
      const double candidate = unk_score_ + base;
      Best& target = best[start + char_len];
      if (target.start < 0 || candidate > target.score) {
        if (!unk_id_) missing_unk();
        target = {candidate, *unk_id_, static_cast<std::int32_t>(start)};
      }
    }
    start += char_len;
  }

  // Backtrack, then emit in order; runs of unknown pieces are fused.
  thread_local std::vector<std::pair<std::int32_t, std::int32_t>> path;  // (start, id), last piece first
  path.clear();
  for (std::size_t end = n; end > 0; end = static_cast<std::size_t>(best[end].start)) {
    path.emplace_back(best[end].start, best[end].id);
  }
  for (std::size_t i = path.size(); i > 0;) {
    const auto [start, id] = path[--i];
    if (!unk_id_ || id != *unk_id_) {
      out.push_back(id);
      continue;
    }
    while (i > 0 && path[i - 1].second == *unk_id_) --i;
    const std::size_t end = i > 0 ? static_cast<std::size_t>(path[i - 1].first) : n;
    push_unknown(word.substr(static_cast<std::size_t>(start), end - static_cast<std::size_t>(start)), out);
  }
}

}  // namespace ferry::text::detail
