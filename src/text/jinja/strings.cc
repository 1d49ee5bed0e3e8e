// Python's str methods on UTF-8 text, with utf8proc for case mapping and character classes.
#include "text/jinja/strings.h"

#include <utf8proc.h>

#include "text/jinja/failure.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/utf8.h"

namespace ferry::text::jinja {
namespace {

char32_t upper(char32_t c) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))); }
char32_t lower(char32_t c) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))); }
char32_t title(char32_t c) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))); }
bool valid(char32_t c) { return c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF); }
utf8proc_category_t category(char32_t c) {
  return valid(c) ? utf8proc_category(static_cast<utf8proc_int32_t>(c)) : UTF8PROC_CATEGORY_CN;
}
bool is_upper(char32_t c) { return category(c) == UTF8PROC_CATEGORY_LU; }
bool is_lower(char32_t c) { return category(c) == UTF8PROC_CATEGORY_LL; }
bool is_cased(char32_t c) {
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}
bool is_alpha(char32_t c) {
  const auto cat = category(c);
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
}
bool is_decimal(char32_t c) { return category(c) == UTF8PROC_CATEGORY_ND; }
bool is_numeric(char32_t c) {
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

// Python's full case mappings where one character becomes several (SpecialCasing.txt, unconditional ones).
const char32_t* special_upper(char32_t c, bool title) {
  switch (c) {
    case 0xDF: return title ? U"Ss" : U"SS";
    case 0xFB00: return title ? U"Ff" : U"FF";
    case 0xFB01: return title ? U"Fi" : U"FI";
    case 0xFB02: return title ? U"Fl" : U"FL";
    case 0xFB03: return title ? U"Ffi" : U"FFI";
    case 0xFB04: return title ? U"Ffl" : U"FFL";
    case 0xFB05:
    case 0xFB06: return title ? U"St" : U"ST";
    case 0x149: return U"\u02BCN";
    default: return nullptr;
  }
}

void append_upper(std::u32string& out, char32_t c, bool title_case) {
  if (const char32_t* s = special_upper(c, title_case)) {
    out += s;
  } else {
    out.push_back(title_case ? title(c) : upper(c));
  }
}

}  // namespace

std::string py_strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string u = utf8_decode(s);
  const std::u32string set = chars ? utf8_decode(*chars) : std::u32string{};
  auto strip_it = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_space(c); };
  std::size_t b = 0, e = u.size();
  if (left) {
    while (b < e && strip_it(u[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(u[e - 1])) --e;
  }
  return utf8_encode(u.substr(b, e - b));
}

std::vector<std::string> py_split(const std::string& s, const std::optional<std::string>& sep, std::int64_t maxsplit,
                                  bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    if (!from_right) {
      std::size_t pos = 0;
      while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
        const std::size_t f = s.find(*sep, pos);
        if (f == std::string::npos) break;
        out.push_back(s.substr(pos, f - pos));
        pos = f + sep->size();
      }
      out.push_back(s.substr(pos));
      return out;
    }
    std::size_t end = s.size();
    std::vector<std::string> rev;
    while (maxsplit < 0 || static_cast<std::int64_t>(rev.size()) < maxsplit) {
      if (end < sep->size()) break;
      const std::size_t f = s.rfind(*sep, end - sep->size());
      if (f == std::string::npos) break;
      rev.push_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    rev.push_back(s.substr(0, end));
    return std::vector<std::string>(rev.rbegin(), rev.rend());
  }
  // Whitespace runs; leading and trailing whitespace ignored.
  const std::u32string u = utf8_decode(s);
  std::vector<std::u32string> parts;
  if (!from_right) {
    std::size_t i = 0;
    while (i < u.size()) {
      while (i < u.size() && is_space(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) >= maxsplit) {
        std::size_t e = u.size();
        while (e > i && is_space(u[e - 1])) --e;
        parts.push_back(u.substr(i, e - i));
        break;
      }
      std::size_t j = i;
      while (j < u.size() && !is_space(u[j])) ++j;
      parts.push_back(u.substr(i, j - i));
      i = j;
    }
  } else {
    std::size_t i = u.size();
    std::vector<std::u32string> rev;
    while (i > 0) {
      while (i > 0 && is_space(u[i - 1])) --i;
      if (i == 0) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(rev.size()) >= maxsplit) {
        std::size_t b = 0;
        while (b < i && is_space(u[b])) ++b;
        rev.push_back(u.substr(b, i - b));
        break;
      }
      std::size_t j = i;
      while (j > 0 && !is_space(u[j - 1])) --j;
      rev.push_back(u.substr(j, i - j));
      i = j;
    }
    parts.assign(rev.rbegin(), rev.rend());
  }
  for (const auto& p : parts) out.push_back(utf8_encode(p));
  return out;
}

std::vector<std::string> py_splitlines(const std::string& s, bool keepends) {
  const std::u32string u = utf8_decode(s);
  std::vector<std::string> out;
  std::size_t start = 0, i = 0;
  auto is_break = [](char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
  };
  while (i < u.size()) {
    if (!is_break(u[i])) {
      ++i;
      continue;
    }
    std::size_t eol = i + 1;
    if (u[i] == '\r' && eol < u.size() && u[eol] == '\n') ++eol;
    out.push_back(utf8_encode(u.substr(start, (keepends ? eol : i) - start)));
    start = i = eol;
  }
  if (start < u.size()) out.push_back(utf8_encode(u.substr(start)));
  return out;
}

std::string py_case(const std::string& s, const std::string& which) {
  const std::u32string u = utf8_decode(s);
  std::u32string out;
  out.reserve(u.size());
  if (which == "upper") {
    for (const char32_t c : u) append_upper(out, c, false);
  } else if (which == "lower") {
    for (const char32_t c : u) out.push_back(lower(c));
  } else if (which == "swapcase") {
    for (const char32_t c : u) {
      if (is_upper(c)) out.push_back(lower(c));
      else if (is_lower(c)) append_upper(out, c, false);
      else out.push_back(c);
    }
  } else if (which == "capitalize") {
    for (std::size_t i = 0; i < u.size(); ++i) {
      if (i == 0) append_upper(out, u[i], true);
      else out.push_back(lower(u[i]));
    }
  } else {  // title
    bool prev_cased = false;
    for (const char32_t c : u) {
      if (prev_cased) out.push_back(lower(c));
      else append_upper(out, c, true);
      prev_cased = is_cased(c);
    }
  }
  return utf8_encode(out);
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& with, std::int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` between every code point (and at both ends).
    const std::u32string u = utf8_decode(s);
    std::int64_t done = 0;
    for (std::size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      if (i < u.size()) utf8_append(out, u[i]);
      if (out.size() > Limits::kMaxOutput) fail("the replaced string is too long");
    }
    return out;
  }
  std::size_t pos = 0;
  std::int64_t done = 0;
  while (count < 0 || done < count) {
    const std::size_t f = s.find(old, pos);
    if (f == std::string::npos) break;
    out.append(s, pos, f - pos);
    out += with;
    if (out.size() > Limits::kMaxOutput) fail("the replaced string is too long");
    pos = f + old.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

std::string py_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}' ) {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const std::size_t close = fmt.find('}', i);
    if (close == std::string::npos) fail("Single '{' encountered in format string");
    const std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) fail("format specs and conversions are not supported in str.format");
    const Value* v = nullptr;
    if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
      const std::size_t idx = field.empty() ? auto_index++ : static_cast<std::size_t>(std::stoul(field));
      if (idx >= args.args.size()) fail("Replacement index " + std::to_string(idx) + " out of range for positional args tuple");
      v = &args.args[idx];
    } else {
      for (const auto& [k, kv] : args.kwargs) {
        if (k == field) v = &kv;
      }
      if (!v) fail("KeyError: '" + field + "'");
    }
    out += to_str(*v);
    if (out.size() > Limits::kMaxOutput) fail("the formatted string is too long");
    i = close;
  }
  return out;
}

bool py_is(const std::string& s, const std::string& which) {
  const std::u32string u = utf8_decode(s);
  if (u.empty()) return false;
  if (which == "isupper" || which == "islower") {
    bool cased = false;
    for (const char32_t c : u) {
      if (which == "isupper" ? is_lower(c) : is_upper(c)) return false;
      if (category(c) == UTF8PROC_CATEGORY_LT) return false;
      if (is_cased(c)) cased = true;
    }
    return cased;
  }
  for (const char32_t c : u) {
    bool ok = false;
    if (which == "isdigit" || which == "isdecimal") ok = is_decimal(c);
    else if (which == "isnumeric") ok = is_numeric(c);
    else if (which == "isalpha") ok = is_alpha(c);
    else if (which == "isalnum") ok = is_alpha(c) || is_numeric(c);
    else if (which == "isspace") ok = is_space(c);
    if (!ok) return false;
  }
  return true;
}

}  // namespace ferry::text::jinja
