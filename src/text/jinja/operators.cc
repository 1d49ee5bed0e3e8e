// Arithmetic, comparison, membership and iteration with Python's semantics, as jinja2 evaluates them.
#include <climits>
#include <cmath>

#include "text/jinja/builtins.h"
#include "text/jinja/failure.h"
#include "text/jinja/utf8.h"

namespace ferry::text::jinja {
namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) {
    const Value& u = a.is_undefined() ? a : b;
    fail(undefined_message(u));
  }
  fail("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

Value repeat(const Value& seq, std::int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && static_cast<std::uint64_t>(n) > Limits::kMaxOutput / s.size()) fail("the repeated string is too long");
    std::string out;
    out.reserve(s.size() * static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) out += s;
    return Value::string(std::move(out));
  }
  const List& items = seq.as_list();
  if (!items.empty() && static_cast<std::uint64_t>(n) > Limits::kMaxListItems / items.size()) fail("the repeated list is too long");
  List out;
  for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.is_tuple());
}

double py_fmod(double a, double b, double* div_out) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, b);
  }
  double floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, a / b);
  }
  if (div_out) *div_out = floordiv;
  return mod;
}

Value int_pow(std::int64_t base, std::int64_t exp) {
  if (exp < 0) {
    if (base == 0) fail("0.0 cannot be raised to a negative power");
    return Value::number(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  if (base == 0) return Value::integer(exp == 0 ? 1 : 0);
  if (base == 1) return Value::integer(1);
  if (base == -1) return Value::integer(exp % 2 ? -1 : 1);
  std::int64_t result = 1;
  for (std::int64_t i = 0; i < exp; ++i) {
    if (__builtin_mul_overflow(result, base, &result)) fail("integer overflow in **", "ferry's integers are 64-bit");
  }
  return Value::integer(result);
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    const bool ints = !a.is_float() && !b.is_float();
    const std::int64_t x = a.as_int(), y = b.as_int();
    const double fx = a.as_float(), fy = b.as_float();
    std::int64_t r = 0;
    if (op == "+") {
      if (!ints) return Value::number(fx + fy);
      if (__builtin_add_overflow(x, y, &r)) fail("integer overflow in +", "ferry's integers are 64-bit");
      return Value::integer(r);
    }
    if (op == "-") {
      if (!ints) return Value::number(fx - fy);
      if (__builtin_sub_overflow(x, y, &r)) fail("integer overflow in -", "ferry's integers are 64-bit");
      return Value::integer(r);
    }
    if (op == "*") {
      if (!ints) return Value::number(fx * fy);
      if (__builtin_mul_overflow(x, y, &r)) fail("integer overflow in *", "ferry's integers are 64-bit");
      return Value::integer(r);
    }
    if (op == "/") {
      if (fy == 0) fail("division by zero");
      return Value::number(fx / fy);
    }
    if (op == "//" || op == "%") {
      if (ints) {
        if (y == 0) fail("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) {
          if (op == "%") return Value::integer(0);
          fail("integer overflow in //");
        }
        std::int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value::integer(op == "//" ? q : m);
      }
      if (fy == 0) fail("float division by zero");
      double div = 0;
      const double mod = py_fmod(fx, fy, &div);
      return Value::number(op == "//" ? div : mod);
    }
    if (op == "**") {
      if (ints) return int_pow(x, y);
      if (fx == 0 && fy < 0) fail("0.0 cannot be raised to a negative power");
      if (fx < 0 && std::floor(fy) != fy) fail("a negative number cannot be raised to a fractional power here");
      return Value::number(std::pow(fx, fy));
    }
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.as_string().size() + b.as_string().size() > Limits::kMaxOutput) fail("the joined string is too long");
      return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value::list(std::move(out), a.is_tuple());
    }
    if (a.is_list() && b.is_list()) {
      fail("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " + a.type_name());
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
  }
  if (op == "%" && a.is_string()) {
    fail("printf-style string formatting (str % value) is not supported", "use ~ or the format filter");
  }
  unsupported(op, a, b);
}

int order(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    const double x = a.as_float(), y = b.as_float();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return order(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.is_undefined() || b.is_undefined()) unsupported("<", a, b);
  fail("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string()) fail("'in <string>' requires string as left operand, not " + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::List:
      for (const Value& v : container.as_list()) {
        if (equal(v, item)) return true;
      }
      return false;
    case Value::Kind::Dict:
      if (item.is_list() && !item.is_tuple()) fail("unhashable type: 'list'");
      if (item.is_dict()) fail("unhashable type: 'dict'");
      return container.find(item) != nullptr;
    default: fail("argument of type '" + container.type_name() + "' is not iterable");
  }
}

bool compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equal(a, b);
  if (op == "!=") return !equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  const int c = order(a, b);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.as_list();
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      for (const auto& [k, item] : v.as_dict()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::String: {
      std::vector<Value> chars;
      std::string one;
      for (const char32_t c : utf8_decode(v.as_string())) {
        one.clear();
        utf8_append(one, c);
        chars.push_back(Value::string(one));
      }
      return chars;
    }
    default: fail("'" + v.type_name() + "' object is not iterable");
  }
}

}  // namespace ferry::text::jinja
