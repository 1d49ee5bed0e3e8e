// Bpe (see bpe.h): vocabulary and merges from tokenizer.json, and the heap-driven merge loop of HF's
// Word::merge_all.
#include "text/bpe.h"

#include <algorithm>
#include <mutex>

#include "ferry/core/error.h"
#include "text/unicode.h"

namespace ferry::text::detail {

// ---- MergeMap ------------------------------------------------------------------------------------

namespace {
constexpr std::uint64_t kEmpty = ~0ull;
}

void MergeMap::reserve(std::size_t n) {
  std::size_t cap = 16;
  while (cap < n * 2) cap *= 2;
  keys_.assign(cap, kEmpty);
  values_.assign(cap, Merge{0, 0});
  mask_ = cap - 1;
  size_ = 0;
}

void MergeMap::grow() {
  std::vector<std::uint64_t> old_keys = std::move(keys_);
  std::vector<Merge> old_values = std::move(values_);
  reserve(std::max<std::size_t>(16, old_keys.size()));
  for (std::size_t i = 0; i < old_keys.size(); ++i) {
    if (old_keys[i] == kEmpty) continue;
    insert(static_cast<std::int32_t>(old_keys[i] >> 32), static_cast<std::int32_t>(old_keys[i] & 0xFFFFFFFFu),
           old_values[i]);
  }
}

void MergeMap::insert(std::int32_t a, std::int32_t b, Merge m) {
  if (keys_.empty() || (size_ + 1) * 2 > keys_.size()) grow();
  const std::uint64_t k = key(a, b);
  for (std::size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
    if (keys_[i] == k) {
      values_[i] = m;
      return;
    }
    if (keys_[i] == kEmpty) {
      keys_[i] = k;
      values_[i] = m;
      ++size_;
      return;
    }
  }
}

const MergeMap::Merge* MergeMap::find(std::int32_t a, std::int32_t b) const {
  if (keys_.empty()) return nullptr;
  const std::uint64_t k = key(a, b);
  for (std::size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
    if (keys_[i] == k) return &values_[i];
    if (keys_[i] == kEmpty) return nullptr;
  }
}

// ---- Loading -------------------------------------------------------------------------------------

namespace {

// A merge rule as two token strings: "a b" (legacy merges.txt lines) or ["a", "b"].
std::pair<std::string, std::string> parse_merge(const JsonView& m) {
  if (m.raw().is_string()) {
    const std::string line = m.as_string();
    const std::size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      m.fail("bad merge \"" + line + "\": expected two tokens separated by one space");
    }
    return {line.substr(0, space), line.substr(space + 1)};
  }
  if (m.raw().is_array()) {
    if (m.size() != 2) m.fail("bad merge: expected a pair [\"a\", \"b\"], got " + std::to_string(m.size()) + " items");
    return {m[0].as_string(), m[1].as_string()};
  }
  m.fail("bad merge: expected a string \"a b\" or a pair [\"a\", \"b\"]");
}

}  // namespace

std::unique_ptr<Bpe> Bpe::parse(const JsonView& model) {
  auto bpe = std::make_unique<Bpe>();
  if (auto d = model.get("dropout")) {
    if (!d->raw().is_number()) d->fail("expected a number or null");
    const double p = d->raw().get<double>();
    if (p < 0.0 || p > 1.0) d->fail("dropout must lie in [0, 1]");
    if (p != 0.0) d->fail("BPE dropout is not supported by ferry", "dropout randomises encoding; set it to null");
  }
  if (auto v = model.get("unk_token")) bpe->unk_token_ = v->as_string();
  if (auto v = model.get("continuing_subword_prefix")) bpe->continuing_subword_prefix_ = v->as_string();
  if (auto v = model.get("end_of_word_suffix")) bpe->end_of_word_suffix_ = v->as_string();
  bpe->fuse_unk_ = model.bool_or("fuse_unk", false);
  bpe->byte_fallback_ = model.bool_or("byte_fallback", false);
  bpe->ignore_merges_ = model.bool_or("ignore_merges", false);

  const JsonView vocab = model.at("vocab");
  vocab.expect_object();
  bpe->vocab_.reserve(vocab.raw().size());
  vocab.for_each_member([&](const std::string& token, const JsonView& field) {
    const std::uint32_t v = field.as_u32();
    if (v > 0x7FFFFFFFu) field.fail("token id " + std::to_string(v) + " is too large");
    if (!is_valid_utf8(token)) field.fail("token is not valid UTF-8");
    bpe->vocab_.emplace(token, static_cast<std::int32_t>(v));
    bpe->vocab_r_.emplace(static_cast<std::int32_t>(v), token);
    bpe->max_id_ = std::max(bpe->max_id_, static_cast<std::int32_t>(v));
  });
  for (int b = 0; b < 256; ++b) {
    static const char* kHex = "0123456789ABCDEF";
    const std::string name = std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
    const auto it = bpe->vocab_.find(name);
    bpe->byte_ids_[b] = it == bpe->vocab_.end() ? -1 : it->second;
  }

  if (!bpe->continuing_subword_prefix_ && !bpe->end_of_word_suffix_) {
    bpe->char_ids_.assign(0x10000, -1);
    for (const auto& [token, id] : bpe->vocab_) {
      if (token.empty() || utf8_length(static_cast<unsigned char>(token[0])) != token.size() || token.size() > 3) continue;
      std::size_t i = 0;
      bpe->char_ids_[next_code_point(token, i)] = id;
    }
  }

  const JsonView merges = model.at("merges");
  const std::size_t prefix_len = bpe->continuing_subword_prefix_ ? bpe->continuing_subword_prefix_->size() : 0;
  bpe->merges_.reserve(merges.size());
  std::uint32_t rank = 0;
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const JsonView m = merges[i];
    if (m.raw().is_string() && m.raw().get_ref<const std::string&>().rfind("#version", 0) == 0) continue;
    auto [a, b] = parse_merge(m);
    const auto ia = bpe->vocab_.find(a), ib = bpe->vocab_.find(b);
    if (ia == bpe->vocab_.end()) m.fail("merge token \"" + a + "\" is not in model.vocab");
    if (ib == bpe->vocab_.end()) m.fail("merge token \"" + b + "\" is not in model.vocab");
    if (b.size() < prefix_len) m.fail("merge token \"" + b + "\" is shorter than continuing_subword_prefix");
    const std::string merged = a + b.substr(prefix_len);
    const auto im = bpe->vocab_.find(merged);
    if (im == bpe->vocab_.end()) m.fail("merged token \"" + merged + "\" is not in model.vocab");
    bpe->merges_.insert(ia->second, ib->second, {rank++, im->second});
  }
  return bpe;
}

std::optional<std::int32_t> Bpe::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* Bpe::id_to_token(std::int32_t id) const {
  const auto it = vocab_r_.find(id);
  return it == vocab_r_.end() ? nullptr : &it->second;
}

// ---- Encoding ------------------------------------------------------------------------------------

namespace {

struct Symbol {
  std::int32_t id;
  std::int32_t prev, next;  // neighbours in the linked list, -1 at the ends
  std::uint32_t len;        // bytes covered; 0 once merged into its left neighbour
};

struct Candidate {
  std::uint32_t rank;
  std::uint32_t pos;
  std::int32_t new_id;
  // std heaps are max-heaps: "greater" means lower priority, so (rank, pos) ascending pops first.
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

void Bpe::merge_word(std::string_view word, std::vector<std::int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  symbols.clear();
  heap.clear();
  auto add = [&](std::int32_t id, std::uint32_t len) {
    const auto n = static_cast<std::int32_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back({id, n - 1, -1, len});
  };
  auto unk_id = [&]() -> std::int32_t {
    const auto it = vocab_.find(*unk_token_);
    if (it == vocab_.end()) {
      throw Error("unk_token \"" + *unk_token_ + "\" is not in model.vocab", "tokenizer.json: model.unk_token");
    }
    return it->second;
  };

  // 1. Characters to initial symbols (HF's BPE::merge_word).
  bool has_unk = false;  // a pending unk symbol, not yet added because the next one may fuse with it
  std::int32_t unk_token_id = 0;
  std::uint32_t unk_len = 0;
  std::string s;
  std::size_t i = 0;
  while (i < word.size()) {
    const std::size_t start = i;
    i += utf8_length(static_cast<unsigned char>(word[i]));
    const auto byte_len = static_cast<std::uint32_t>(i - start);
    std::string_view ch = word.substr(start, i - start);
    if (!char_ids_.empty() && byte_len <= 3) {  // fast path: a table lookup instead of hashing
      std::size_t k = start;
      const std::int32_t id = char_ids_[next_code_point(word, k)];
      if (id >= 0) {
        if (has_unk) {
          add(unk_token_id, unk_len);
          has_unk = false;
        }
        add(id, byte_len);
        continue;
      }
    }
    const bool decorate = (start > 0 && continuing_subword_prefix_) || (i == word.size() && end_of_word_suffix_);
    if (decorate) {
      s.assign(start > 0 && continuing_subword_prefix_ ? *continuing_subword_prefix_ : "");
      s.append(ch);
      if (i == word.size() && end_of_word_suffix_) s.append(*end_of_word_suffix_);
      ch = s;
    }
    if (const auto it = vocab_.find(ch); it != vocab_.end()) {
      if (has_unk) {
        add(unk_token_id, unk_len);
        has_unk = false;
      }
      add(it->second, byte_len);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : ch) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (char c : ch) add(byte_ids_[static_cast<unsigned char>(c)], 1);
        continue;
      }
    }
    if (unk_token_) {
      if (has_unk && fuse_unk_) {
        unk_len += byte_len;
      } else {
        if (has_unk) add(unk_token_id, unk_len);
        unk_token_id = unk_id();
        unk_len = byte_len;
        has_unk = true;
      }
    }
  }
  if (has_unk) add(unk_token_id, unk_len);

  // 2. Merge the lowest-ranked adjacent pair until no rule applies (HF's Word::merge_all).
  for (std::size_t k = 0; k + 1 < symbols.size(); ++k) {
    if (const auto* m = merges_.find(symbols[k].id, symbols[k + 1].id)) {
      heap.push_back({m->rank, static_cast<std::uint32_t>(k), m->new_id});
    }
  }
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& cur = symbols[top.pos];
    if (cur.len == 0 || cur.next == -1) continue;
    const Symbol right = symbols[cur.next];
    const auto* m = merges_.find(cur.id, right.id);
    if (!m || m->new_id != top.new_id) continue;  // stale entry: the pair has changed since
    const std::int32_t right_pos = cur.next;
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    symbols[right_pos].len = 0;
    if (right.next >= 0) symbols[right.next].prev = static_cast<std::int32_t>(top.pos);
    if (cur.prev >= 0) {
      if (const auto* pm = merges_.find(symbols[cur.prev].id, cur.id)) {
        heap.push_back({pm->rank, static_cast<std::uint32_t>(cur.prev), pm->new_id});
        std::push_heap(heap.begin(), heap.end());
      }
    }
    if (cur.next >= 0) {
      if (const auto* nm = merges_.find(cur.id, symbols[cur.next].id)) {
        heap.push_back({nm->rank, top.pos, nm->new_id});
        std::push_heap(heap.begin(), heap.end());
      }
    }
  }
  for (const Symbol& sym : symbols) {
    if (sym.len != 0) out.push_back(sym.id);
  }
}

void Bpe::tokenize(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() < kCacheMaxWordBytes;
  if (cacheable) {
    std::shared_lock lock(cache_mutex_);
    if (const auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t first = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::unique_lock lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::vector<std::int32_t>(out.begin() + first, out.end()));
  }
}

}  // namespace ferry::text::detail
