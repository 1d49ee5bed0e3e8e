// Strict JSON parsing for untrusted files (see json_strict.h).
#include "io/json_strict.h"

#include <limits>
#include <set>
#include <vector>

#include "ferry/core/error.h"

namespace ferry::io::detail {

std::optional<std::size_t> find_invalid_utf8(std::string_view text) noexcept {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return i;
    }
    if (n - i < len) return i;
    for (std::size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::nullopt;
}

namespace {

// A SAX pass that only looks for keys repeated inside one object (a stack of key sets, one per open object).
// nlohmann's parse callback could do this too, but its DOM builder rescans the parent object after every child
// object, which is quadratic in the number of entries (minutes for a 20k-entry index).
class DuplicateKeyFinder : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!open_.empty() && !open_.back().insert(k).second) {
      duplicate = k;
      return false;  // stop: one is enough
    }
    return true;
  }
  bool end_object() override {
    if (!open_.empty()) open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error = e.what();
    return false;
  }

  std::optional<std::string> duplicate;
  std::optional<std::string> error;

 private:
  std::vector<std::set<std::string>> open_;
};

}  // namespace

nlohmann::json parse_json_strict(std::string_view text, const std::string& where, std::string_view what) {
  if (auto bad = find_invalid_utf8(text))
    throw Error(std::string(what) + " is not valid UTF-8 (bad byte sequence at offset " + std::to_string(*bad) + ")",
                where);
  DuplicateKeyFinder finder;
  nlohmann::json::sax_parse(text.begin(), text.end(), &finder, nlohmann::json::input_format_t::json,
                            /*strict=*/true, /*ignore_comments=*/false);
  if (finder.error) throw Error(std::string(what) + " is not valid JSON: " + *finder.error, where);
  if (finder.duplicate) throw Error(std::string(what) + " repeats the key \"" + *finder.duplicate + "\"", where);
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {  // not reached: the SAX pass saw the same text
    throw Error(std::string(what) + " is not valid JSON: " + e.what(), where);
  }
}

std::optional<int64_t> json_nonneg_int(const nlohmann::json& v) noexcept {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    const auto i = v.get<int64_t>();
    if (i < 0) return std::nullopt;
    return i;
  }
  return std::nullopt;
}

std::optional<int64_t> json_int(const nlohmann::json& v) noexcept {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

std::string json_brief(const nlohmann::json& v) {
  // Containers are described, not dumped: dump() recurses, and an attacker controls the nesting depth.
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " items";
  if (v.is_object()) return "an object";
  std::string s = v.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

}  // namespace ferry::io::detail
