// Strict JSON for untrusted headers and index files: valid UTF-8 first, then nlohmann::json parsing that also
// refuses duplicate keys (nlohmann silently keeps the last one, which would let a file say two things at once).
// Internal to ferry_io.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ferry::io::detail {

/// Byte offset of the first invalid UTF-8 sequence (overlong forms, surrogates and code points past U+10FFFF are
/// invalid), or nullopt when `text` is valid.
std::optional<std::size_t> find_invalid_utf8(std::string_view text) noexcept;

/// Parses `text` as one JSON value. Throws ferry::Error(where) naming the problem: invalid UTF-8 (with the byte
/// offset), a syntax error (nlohmann's message), or a key repeated inside one object (with the key).
/// `what` names the document in messages ("safetensors header", "index.json").
nlohmann::json parse_json_strict(std::string_view text, const std::string& where, std::string_view what);

/// A JSON number that is an integer in [0, 2^63): nullopt for anything else (negative, fractional, too big).
std::optional<int64_t> json_nonneg_int(const nlohmann::json& v) noexcept;
/// A JSON integer in int64 range (possibly negative): nullopt for anything else.
std::optional<int64_t> json_int(const nlohmann::json& v) noexcept;

/// A short, printable rendering of a JSON value for error messages (truncated to ~60 characters).
std::string json_brief(const nlohmann::json& v);

}  // namespace ferry::io::detail
