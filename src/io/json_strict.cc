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

nlohmann::json parse_json_strict(std::string_view text, const std::string& where, std::string_view what) {
  if (auto bad = find_invalid_utf8(text))
    throw Error(std::string(what) + " is not valid UTF-8 (bad byte sequence at offset " + std::to_string(*bad) + ")",
                where);
  // One set of keys per open object; the parser calls back with object_start before an object's keys.
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  auto callback = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      open_objects.emplace_back();
    } else if (event == E::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == E::key && !open_objects.empty() && parsed.is_string()) {
      if (!open_objects.back().insert(parsed.get<std::string>()).second && !duplicate)
        duplicate = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                              /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string(what) + " is not valid JSON: " + e.what(), where);
  }
  if (duplicate) throw Error(std::string(what) + " repeats the key \"" + *duplicate + "\"", where);
  return j;
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
