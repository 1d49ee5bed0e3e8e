// Normalizers (see normalizer.h). Each mirrors one type of tokenizers/src/normalizers; only the resulting
// text matters here, not HF's character alignments.
#include "text/normalizer.h"

#include <vector>

#include "text/byte_level.h"
#include "text/precompiled.h"
#include "text/unicode.h"

namespace ferry::text::detail {
namespace {

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  bool normalize(std::string& text) const override {
    text = detail::normalize(text, form_);
    return true;
  }

 private:
  NormalForm form_;
};

class Lowercase final : public Normalizer {
 public:
  bool normalize(std::string& text) const override {
    text = lowercase(text);
    return true;
  }
};

// Strip: removes leading and/or trailing White_Space characters.
class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  bool normalize(std::string& text) const override {
    std::size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        std::size_t i = begin;
        if (!is_whitespace(next_code_point(text, i))) break;
        begin = i;
      }
    }
    if (right_) {
      while (end > begin) {
        std::size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        std::size_t i = start;
        if (!is_whitespace(next_code_point(text, i))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
    return begin == 0;
  }

 private:
  bool left_, right_;
};

class StripAccents final : public Normalizer {
 public:
  bool normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    bool keeps_start = true;
    std::size_t i = 0;
    while (i < text.size()) {
      const std::size_t start = i;
      if (!is_combining_mark(next_code_point(text, i))) out.append(text, start, i - start);
      else if (start == 0) keeps_start = false;
    }
    text = std::move(out);
    return keeps_start;
  }
};

class Replace final : public Normalizer {
 public:
  Replace(Regex regex, std::string content) : regex_(std::move(regex)), content_(std::move(content)) {}
  bool normalize(std::string& text) const override {
    bool keeps_start = true;
    text = replace_all(regex_, text, content_, &keeps_start);
    return keeps_start;
  }

 private:
  Regex regex_;
  std::string content_;
};

// Prepend: adds a prefix to non-empty text.
class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  bool normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
    return true;  // HF aligns the prefix with the first character
  }

 private:
  std::string prefix_;
};

class ByteLevelNormalizer final : public Normalizer {
 public:
  bool normalize(std::string& text) const override {
    std::string out;
    byte_level_encode(text, out);
    text = std::move(out);
    return true;
  }
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  bool normalize(std::string& text) const override {
    bool keeps_start = true;
    for (const auto& s : steps_) keeps_start = s->normalize(text) && keeps_start;
    return keeps_start;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

Regex parse_pattern(const JsonView& pattern) {
  pattern.expect_object();
  if (pattern.has("String")) {
    return Regex(escape_literal(pattern.at("String").as_string()), pattern.where());
  }
  if (pattern.has("Regex")) {
    const JsonView r = pattern.at("Regex");
    return Regex(r.as_string(), r.where());
  }
  pattern.fail("expected {\"String\": ...} or {\"Regex\": ...}");
}

std::string replace_all(const Regex& regex, std::string_view text, std::string_view content, bool* keeps_start) {
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  regex.find_all(text, matches);
  if (matches.empty()) return std::string(text);
  if (keeps_start && matches.front().first == 0 && matches.front().second > 0) {
    // HF aligns replacement characters with the last character matched, and without any the output starts
    // at the first character after the match: only a match of the first character alone keeps the start.
    *keeps_start = !content.empty() && matches.front().second <= utf8_length(static_cast<unsigned char>(text[0]));
  }
  std::string out;
  out.reserve(text.size() + matches.size() * content.size());
  std::size_t last = 0;
  for (const auto& [begin, end] : matches) {
    out.append(text.substr(last, begin - last));
    out.append(content);
    last = end;
  }
  out.append(text.substr(last));
  return out;
}

std::unique_ptr<Normalizer> parse_normalizer(const JsonView& json) {
  json.expect_object();
  const std::string type = json.at("type").as_string();
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
  if (type == "Strip") {
    const bool left = json.at("strip_left").as_bool();  // read in order, so errors name the first problem
    const bool right = json.at("strip_right").as_bool();
    return std::make_unique<Strip>(left, right);
  }
  if (type == "Prepend") return std::make_unique<Prepend>(json.at("prepend").as_string());
  if (type == "Replace") {
    Regex pattern = parse_pattern(json.at("pattern"));
    return std::make_unique<Replace>(std::move(pattern), json.at("content").as_string());
  }
  if (type == "Sequence") {
    const JsonView list = json.at("normalizers");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (std::size_t i = 0; i < list.size(); ++i) steps.push_back(parse_normalizer(list[i]));
    return std::make_unique<Sequence>(std::move(steps));
  }
  if (type == "Precompiled") return parse_precompiled(json);
  if (type == "BertNormalizer" || type == "Nmt") {
    json.at("type").fail("the " + type + " normalizer is not supported by ferry",
                         "ferry supports NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, "
                         "ByteLevel, Precompiled and Sequence");
  }
  json.at("type").fail("unknown normalizer type \"" + type + "\"");
}

}  // namespace ferry::text::detail
