// Python's str methods as chat templates use them (strip, split, case changes, replace, format, predicates),
// working on code points.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ferry::text::jinja {

struct CallArgs;

/// str.strip / lstrip / rstrip: whitespace when `chars` is absent, else any of its code points.
std::string py_strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right);
/// str.split / rsplit (whitespace runs when `sep` is absent; an empty separator fails).
std::vector<std::string> py_split(const std::string& s, const std::optional<std::string>& sep, std::int64_t maxsplit,
                                  bool from_right);
std::vector<std::string> py_splitlines(const std::string& s, bool keepends);
/// "upper", "lower", "title", "capitalize", "swapcase".
std::string py_case(const std::string& s, const std::string& which);
std::string py_replace(const std::string& s, const std::string& old, const std::string& with, std::int64_t count);
/// str.format with {} / {0} / {name} fields (no format specs beyond none).
std::string py_format(const std::string& fmt, const CallArgs& args);
/// "isdigit", "isalpha", "isspace", "isupper", "islower", "isalnum", "isnumeric", "isdecimal".
bool py_is(const std::string& s, const std::string& which);

}  // namespace ferry::text::jinja
