// The Jinja lexer, following jinja2's lexer.py rule by rule (see lexer.h for the configuration it mirrors).
#include "text/jinja/lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <tuple>

#include "ferry/core/error.h"
#include "text/jinja/utf8.h"

namespace ferry::text::jinja {

std::string location(const std::string& name, int line, int column) {
  return name + ":" + std::to_string(line) + ":" + std::to_string(column);
}

namespace {

// One code point of `s` at byte `pos` (invalid bytes as themselves); `len` gets its byte length.
char32_t decode_at(const std::string& s, std::size_t pos, std::size_t& len) {
  const auto b = static_cast<unsigned char>(s[pos]);
  std::size_t n = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
  if (pos + n > s.size()) n = 1;
  const std::u32string c = utf8_decode(s.substr(pos, n));
  len = n;
  if (c.size() != 1) {
    len = 1;
    return 0xDC00 + b;
  }
  return c[0];
}

bool space_at(const std::string& s, std::size_t pos, std::size_t& len) {
  if (pos >= s.size()) return false;
  return is_space(decode_at(s, pos, len));
}

std::size_t skip_space(const std::string& s, std::size_t pos) {
  std::size_t len = 0;
  while (space_at(s, pos, len)) pos += len;
  return pos;
}

std::string rstrip(const std::string& s) {
  std::u32string u = utf8_decode(s);
  while (!u.empty() && is_space(u.back())) u.pop_back();
  return utf8_encode(u);
}

bool all_space(const std::string& s) {
  if (s.empty()) return false;
  for (const char32_t c : utf8_decode(s)) {
    if (!is_space(c)) return false;
  }
  return true;
}

bool starts(const std::string& s, std::size_t pos, const char* lit) {
  return s.compare(pos, std::strlen(lit), lit) == 0;
}

bool is_name_start(unsigned char c) { return std::isalpha(c) || c == '_' || c >= 0x80; }
bool is_name_char(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }

class Lexer {
 public:
  Lexer(const std::string& source, const std::string& name) : name_(name) {
    // Newlines as jinja2 reads them, then one trailing newline dropped (keep_trailing_newline=False).
    src_.reserve(source.size());
    for (std::size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_.push_back('\n');
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_.push_back(source[i]);
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    std::size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      std::size_t tag = pos;
      int kind = 0;  // 1 = {{, 2 = {%, 3 = {#
      for (;;) {
        tag = src_.find('{', tag);
        if (tag == std::string::npos || tag + 1 >= src_.size()) {
          tag = std::string::npos;
          break;
        }
        const char c = src_[tag + 1];
        if (c == '{' || c == '%' || c == '#') {
          kind = c == '{' ? 1 : c == '%' ? 2 : 3;
          break;
        }
        ++tag;
      }
      if (tag == std::string::npos) {
        emit_data(src_.substr(pos), pos);
        break;
      }
      std::string text = src_.substr(pos, tag - pos);
      std::size_t after = tag + 2;
      char sign = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
      std::size_t raw_body = 0;
      const bool raw = kind == 2 && match_raw_begin(after, raw_body);
      if (sign == '-') {
        text = rstrip(text);
      } else if (sign != '+' && kind != 1) {
        text = lstrip_block(text, line_starting);
      }
      emit_data(text, pos);
      if (raw) {
        pos = lex_raw(raw_body, line_starting);
      } else if (kind == 3) {
        pos = lex_comment(tag, after, line_starting);
      } else {
        pos = lex_tag(kind == 1, tag, after, line_starting);
      }
    }
    push(Token::Type::End, src_.size());
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void error(std::size_t pos, const std::string& problem, const std::string& hint = {}) {
    const auto [line, column] = line_column(pos);
    throw Error(problem, location(name_, line, column),
                hint.empty() ? "check the template's syntax (Jinja, as jinja2 parses it)" : hint);
  }

  std::pair<int, int> line_column(std::size_t pos) const {
    std::size_t lo = 0, hi = line_starts_.size();
    while (hi - lo > 1) {
      const std::size_t mid = (lo + hi) / 2;
      if (line_starts_[mid] <= pos) lo = mid;
      else hi = mid;
    }
    return {static_cast<int>(lo + 1), static_cast<int>(pos - line_starts_[lo] + 1)};
  }

  Token& push(Token::Type type, std::size_t pos, std::string text = {}) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    std::tie(t.line, t.column) = line_column(pos);
    tokens_.push_back(std::move(t));
    return tokens_.back();
  }

  void emit_data(std::string text, std::size_t pos) {
    if (!text.empty()) push(Token::Type::Data, pos, std::move(text));
  }

  // lstrip_blocks: spaces between the line's start and a block or comment tag go.
  static std::string lstrip_block(const std::string& text, bool line_starting) {
    const auto nl = text.rfind('\n');
    const std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting) && all_space(text.substr(l_pos))) return text.substr(0, l_pos);
    return text;
  }

  // `{%[-+]? raw (-%}\s*|%})` at `after` (just past the sign); `body` gets where the raw text starts.
  bool match_raw_begin(std::size_t after, std::size_t& body) {
    std::size_t p = skip_space(src_, after);
    if (!starts(src_, p, "raw")) return false;
    p = skip_space(src_, p + 3);
    if (starts(src_, p, "-%}")) {
      body = skip_space(src_, p + 3);
      return true;
    }
    if (starts(src_, p, "%}")) {
      body = p + 2;
      return true;
    }
    return false;
  }

  std::size_t lex_raw(std::size_t body, bool& line_starting) {
    line_starting = body > 0 && src_[body - 1] == '\n';
    std::size_t p = body;
    for (;;) {
      p = src_.find("{%", p);
      if (p == std::string::npos) error(body, "missing end of raw directive", "close it with {% endraw %}");
      std::size_t q = p + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q = skip_space(src_, q);
      if (!starts(src_, q, "endraw")) {
        p += 2;
        continue;
      }
      q = skip_space(src_, q + 6);
      std::size_t end = 0;
      if (starts(src_, q, "+%}")) end = q + 3;
      else if (starts(src_, q, "-%}")) end = skip_space(src_, q + 3);
      else if (starts(src_, q, "%}")) end = q + 2 + (q + 2 < src_.size() && src_[q + 2] == '\n' ? 1 : 0);
      else {
        p += 2;
        continue;
      }
      std::string text = src_.substr(body, p - body);
      if (sign == '-') text = rstrip(text);
      else if (sign != '+') text = lstrip_block(text, line_starting);
      emit_data(text, body);
      line_starting = src_[end - 1] == '\n';
      return end;
    }
  }

  std::size_t lex_comment(std::size_t tag, std::size_t after, bool& line_starting) {
    for (std::size_t p = after; p < src_.size(); ++p) {
      std::size_t end = 0;
      if (starts(src_, p, "+#}")) end = p + 3;
      else if (starts(src_, p, "-#}")) end = skip_space(src_, p + 3);
      else if (starts(src_, p, "#}")) end = p + 2 + (p + 2 < src_.size() && src_[p + 2] == '\n' ? 1 : 0);
      if (end) {
        line_starting = src_[end - 1] == '\n';
        return end;
      }
    }
    error(tag, "missing end of comment tag", "close the comment with #}");
  }

  // The inside of {{ ... }} or {% ... %}: expression tokens until the closing delimiter at bracket depth 0.
  std::size_t lex_tag(bool variable, std::size_t tag, std::size_t p, bool& line_starting) {
    push(variable ? Token::Type::VarBegin : Token::Type::BlockBegin, tag);
    std::string balance;
    for (;;) {
      if (balance.empty()) {
        std::size_t end = 0;
        if (variable) {
          if (starts(src_, p, "-}}")) end = skip_space(src_, p + 3);
          else if (starts(src_, p, "}}")) end = p + 2;
        } else {
          if (starts(src_, p, "+%}")) end = p + 3;
          else if (starts(src_, p, "-%}")) end = skip_space(src_, p + 3);
          else if (starts(src_, p, "%}")) end = p + 2 + (p + 2 < src_.size() && src_[p + 2] == '\n' ? 1 : 0);
        }
        if (end) {
          push(variable ? Token::Type::VarEnd : Token::Type::BlockEnd, p);
          line_starting = src_[end - 1] == '\n';
          return end;
        }
      }
      std::size_t len = 0;
      if (space_at(src_, p, len)) {
        p = skip_space(src_, p);
        continue;
      }
      if (p >= src_.size()) {
        error(tag, std::string("unexpected end of template: this ") + (variable ? "{{" : "{%") + " is never closed",
              std::string("close it with ") + (variable ? "}}" : "%}"));
      }
      const auto c = static_cast<unsigned char>(src_[p]);
      if (std::isdigit(c)) {
        p = lex_number(p);
      } else if (is_name_start(c)) {
        std::size_t q = p;
        while (q < src_.size() && is_name_char(static_cast<unsigned char>(src_[q]))) ++q;
        push(Token::Type::Name, p, src_.substr(p, q - p));
        p = q;
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        static const char* const ops[] = {"**", "//", "==", "!=", ">=", "<=", "+", "-", "*", "/", "%", "~", "[",
                                          "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};
        const char* op = nullptr;
        for (const char* o : ops) {
          if (starts(src_, p, o)) {
            op = o;
            break;
          }
        }
        if (!op) error(p, std::string("unexpected character '") + src_.substr(p, 1) + "'");
        const std::string o = op;
        if (o == "(" || o == "[" || o == "{") {
          if (balance.size() >= 200) error(p, "brackets nested too deeply");
          balance.push_back(o == "(" ? ')' : o == "[" ? ']' : '}');
        } else if (o == ")" || o == "]" || o == "}") {
          if (balance.empty()) error(p, "unexpected '" + o + "'");
          if (balance.back() != o[0]) error(p, "unexpected '" + o + "', expected '" + std::string(1, balance.back()) + "'");
          balance.pop_back();
        }
        push(Token::Type::Op, p, o);
        p += o.size();
      }
    }
  }

  std::size_t lex_number(std::size_t p) {
    auto digits = [&](std::size_t q, auto ok) {  // (digit _?)* digit run; returns the end
      std::size_t e = q;
      while (e < src_.size() && (ok(src_[e]) || (src_[e] == '_' && e + 1 < src_.size() && ok(src_[e + 1])))) ++e;
      return e;
    };
    auto dec = [](char c) { return c >= '0' && c <= '9'; };
    const std::size_t start = p;
    // Float: digits, then .digits and/or an exponent.
    std::size_t q = digits(p, dec);
    bool is_float = false;
    if (q + 1 < src_.size() && src_[q] == '.' && dec(src_[q + 1])) {
      q = digits(q + 1, dec);
      is_float = true;
    }
    if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
      std::size_t e = q + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && dec(src_[e])) {
        q = digits(e, dec);
        is_float = true;
      }
    }
    std::string text;
    for (std::size_t i = start; i < q; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    if (is_float) {
      Token& t = push(Token::Type::Float, start, text);
      t.float_value = std::strtod(text.c_str(), nullptr);
      return q;
    }
    // Integer: 0b / 0o / 0x prefixes, or decimal (a leading 0 only for zero).
    int base = 10;
    if (src_[p] == '0' && p + 1 < src_.size()) {
      const char x = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[p + 1])));
      base = x == 'b' ? 2 : x == 'o' ? 8 : x == 'x' ? 16 : 10;
    }
    if (base != 10) {
      auto ok = [base](char c) {
        if (base == 2) return c == '0' || c == '1';
        if (base == 8) return c >= '0' && c <= '7';
        return std::isxdigit(static_cast<unsigned char>(c)) != 0;
      };
      std::size_t e = p + 2;
      if (e < src_.size() && src_[e] == '_') ++e;
      const std::size_t end = digits(e, ok);
      if (end == e) error(p, "invalid integer literal");
      text.clear();
      for (std::size_t i = p + 2; i < end; ++i) {
        if (src_[i] != '_') text.push_back(src_[i]);
      }
      q = end;
    } else if (src_[p] == '0') {
      q = p + 1;
      while (q + 1 < src_.size() && src_[q] == '_' && src_[q + 1] == '0') q += 2;
      while (q < src_.size() && src_[q] == '0') ++q;
      text = "0";
    }
    errno = 0;
    char* endp = nullptr;
    const long long v = std::strtoll(text.c_str(), &endp, base);
    if (errno == ERANGE) error(start, "integer literal too large");
    Token& t = push(Token::Type::Int, start, text);
    t.int_value = v;
    return q;
  }

  // A quoted literal; escapes decoded as Python's "unicode-escape" does (unknown escapes stay as written).
  std::size_t lex_string(std::size_t p) {
    const char quote = src_[p];
    std::string out;
    std::size_t q = p + 1;
    for (;;) {
      if (q >= src_.size()) error(p, "unterminated string literal", "close the string with " + std::string(1, quote));
      const char c = src_[q];
      if (c == quote) break;
      if (c != '\\') {
        out.push_back(c);
        ++q;
        continue;
      }
      if (q + 1 >= src_.size()) error(p, "unterminated string literal");
      const char e = src_[q + 1];
      q += 2;
      auto hex = [&](int n) -> char32_t {
        char32_t v = 0;
        for (int i = 0; i < n; ++i, ++q) {
          if (q >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[q])))
            error(q, "truncated \\x, \\u or \\U escape in a string literal");
          const char h = src_[q];
          v = v * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        return v;
      };
      switch (e) {
        case '\n': break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x': utf8_append(out, hex(2)); break;
        case 'u': utf8_append(out, hex(4)); break;
        case 'U': {
          const char32_t v = hex(8);
          if (v > 0x10FFFF) error(q, "\\U escape out of range in a string literal");
          utf8_append(out, v);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = static_cast<char32_t>(e - '0');
            for (int i = 0; i < 2 && q < src_.size() && src_[q] >= '0' && src_[q] <= '7'; ++i, ++q)
              v = v * 8 + static_cast<char32_t>(src_[q] - '0');
            utf8_append(out, v);
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    push(Token::Type::String, p, std::move(out));
    return q + 1;
  }

  const std::string& name_;
  std::string src_;
  std::vector<std::size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const std::string& name) { return Lexer(source, name).run(); }

}  // namespace ferry::text::jinja
