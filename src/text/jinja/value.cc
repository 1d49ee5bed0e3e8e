// Value construction, truthiness, equality and Python's str()/repr() for the Jinja interpreter.
#include "text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "text/jinja/failure.h"
#include "text/jinja/utf8.h"

namespace ferry::text::jinja {

namespace {
constexpr std::uint32_t kMaxDepth = 500;
}  // namespace

Value Value::undefined(std::string name) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(name));
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}
Value Value::integer(std::int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s) {
  if (s.size() > Limits::kMaxOutput) fail("a string of " + std::to_string(s.size()) + " bytes is too long");
  if (s.size() > g_string_budget) fail("the template created more than " + std::to_string(Limits::kStringBudget) + " bytes of strings");
  g_string_budget -= s.size();
  Value v;
  v.kind_ = Kind::String;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::list(List items, bool tuple) {
  if (items.size() > Limits::kMaxListItems) fail("a list of " + std::to_string(items.size()) + " items is too long");
  if (items.size() > g_list_budget) fail("the template created more than " + std::to_string(Limits::kListBudget) + " list items");
  g_list_budget -= items.size();
  Value v;
  v.kind_ = Kind::List;
  v.tuple_ = tuple;
  for (const Value& item : items) v.depth_ = std::max(v.depth_, item.depth_ + 1);
  if (v.depth_ > kMaxDepth) fail("a list nested more than " + std::to_string(kMaxDepth) + " deep");
  v.list_ = std::make_shared<const List>(std::move(items));
  return v;
}
Value Value::dict(DictItems items) {
  Value v;
  v.kind_ = Kind::Dict;
  for (const auto& [k, item] : items) v.depth_ = std::max({v.depth_, k.depth_ + 1, item.depth_ + 1});
  if (v.depth_ > kMaxDepth) fail("a dict nested more than " + std::to_string(kMaxDepth) + " deep");
  v.dict_ = std::make_shared<DictItems>(std::move(items));
  return v;
}
Value Value::namespace_(DictItems items) {
  Value v;
  v.kind_ = Kind::Namespace;
  v.dict_ = std::make_shared<DictItems>(std::move(items));
  return v;
}
Value Value::callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::Callable;
  v.fn_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

double Value::as_float() const {
  switch (kind_) {
    case Kind::Float: return f_;
    case Kind::Int: return static_cast<double>(i_);
    case Kind::Bool: return b_ ? 1.0 : 0.0;
    default: return 0.0;
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b_;
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0.0;
    case Kind::String: return !s_->empty();
    case Kind::List: return !list_->empty();
    case Kind::Dict: return !dict_->empty();
    case Kind::Namespace:
    case Kind::Callable: return true;
  }
  return false;
}

const Value* Value::find(const Value& key) const {
  if (kind_ != Kind::Dict && kind_ != Kind::Namespace) return nullptr;
  for (const auto& [k, v] : *dict_) {
    if (equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* Value::find(const std::string& key) const {
  if (kind_ != Kind::Dict && kind_ != Kind::Namespace) return nullptr;
  for (const auto& [k, v] : *dict_) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return tuple_ ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return "function";
  }
  return "object";
}

const std::string& Value::undefined_name() const {
  static const std::string kNone;
  return kind_ == Kind::Undefined && s_ ? *s_ : kNone;
}

std::string undefined_message(const Value& v) {
  const std::string& n = v.undefined_name();
  if (n.empty()) return "an undefined value was used";
  const auto has = n.find(" has no ");
  if (has != std::string::npos) return "'" + n.substr(0, has) + "'" + n.substr(has);  // 'dict object' has no attribute 'x'
  if (n.find(' ') != std::string::npos) return n;
  return "'" + n + "' is undefined";
}

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.as_string() == b.as_string();
    case K::List: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const List &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!equal(x[i], y[i])) return false;
      }
      return true;
    }
    case K::Dict: {
      const DictItems &x = a.as_dict(), &y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = b.find(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    }
    case K::Namespace: return &a.as_dict() == &b.as_dict();
    case K::Callable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
  char buf[64];
  // Shortest round-trip digits in scientific form, then laid out as Python's repr does ('r' format).
  const auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = false;
  if (sci[0] == '-') {
    negative = true;
    sci.erase(0, 1);
  }
  const auto epos = sci.find('e');
  std::string digits = sci.substr(0, epos);
  const int exp = std::stoi(sci.substr(epos + 1));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string out = negative ? "-" : "";
  const int n = static_cast<int>(digits.size());
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  } else if (exp < 0) {
    out += "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
  } else if (exp + 1 >= n) {
    out += digits + std::string(static_cast<std::size_t>(exp + 1 - n), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<std::size_t>(exp + 1)) + "." + digits.substr(static_cast<std::size_t>(exp + 1));
  }
  return out;
}

namespace {

// Python's str.isprintable() for the code points repr() must escape (an approximation covering the C0/C1
// controls, separators other than the space, and the common format characters).
bool printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x2064))
    return false;
  if (c == 0x3000 || c == 0xFEFF || (c >= 0xD800 && c <= 0xDFFF) || c == 0x061C || c == 0x180E) return false;
  if ((c >= 0xFFF9 && c <= 0xFFFB) || (c >= 0xE000 && c <= 0xF8FF) || c >= 0xF0000) return false;
  return true;
}

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!printable(c)) {
      char buf[16];
      if (c < 0x100) std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000) std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      else std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    } else {
      utf8_append(out, c);
    }
  }
  out += quote;
  return out;
}

void repr_into(std::string& out, const Value& v, int depth);

void str_into(std::string& out, const Value& v, int depth) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return;
    case Value::Kind::String: out += v.as_string(); return;
    default: repr_into(out, v, depth);
  }
}

void repr_into(std::string& out, const Value& v, int depth) {
  if (depth > 64) fail("a value nested more than 64 deep cannot be printed");
  if (out.size() > Limits::kMaxOutput) fail("the printed value is longer than the output limit");
  switch (v.kind()) {
    case Value::Kind::Undefined: return;
    case Value::Kind::None: out += "None"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "True" : "False"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: out += float_repr(v.as_float()); return;
    case Value::Kind::String: out += string_repr(v.as_string()); return;
    case Value::Kind::List: {
      out += v.is_tuple() ? '(' : '[';
      const List& items = v.as_list();
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        repr_into(out, items[i], depth + 1);
      }
      if (v.is_tuple() && items.size() == 1) out += ',';
      out += v.is_tuple() ? ')' : ']';
      return;
    }
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
      if (v.is_namespace()) out += "<Namespace ";
      out += '{';
      bool first = true;
      for (const auto& [k, item] : v.as_dict()) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, k, depth + 1);
        out += ": ";
        repr_into(out, item, depth + 1);
      }
      out += '}';
      if (v.is_namespace()) out += '>';
      return;
    }
    case Value::Kind::Callable: out += "<function " + v.as_callable().name + ">"; return;
  }
}

}  // namespace

std::string to_str(const Value& v) {
  std::string out;
  str_into(out, v, 0);
  return out;
}

std::string to_repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0);
  return out;
}

}  // namespace ferry::text::jinja
