// jinja2's builtin tests (`x is defined`, `x is divisibleby 3`, `x is string`, ...).
#include <cmath>

#include "text/jinja/builtins.h"
#include "text/jinja/failure.h"
#include "text/jinja/strings.h"

namespace ferry::text::jinja {

bool apply_test(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  auto one = [&](const char* param) -> Value { return *a.bind(name, {param}, 1)[0]; };
  auto none = [&] { a.bind(name, {}, 0); };
  if (name == "defined") return none(), !v.is_undefined();
  if (name == "undefined") return none(), v.is_undefined();
  if (name == "none") return none(), v.is_none();
  if (name == "boolean") return none(), v.is_bool();
  if (name == "true") return none(), v.is_bool() && v.as_bool();
  if (name == "false") return none(), v.is_bool() && !v.as_bool();
  if (name == "integer") return none(), v.is_int();
  if (name == "float") return none(), v.is_float();
  if (name == "number") return none(), v.is_number();
  if (name == "string") return none(), v.is_string();
  if (name == "mapping") return none(), v.is_dict();
  if (name == "iterable") return none(), v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence") return none(), v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "callable") return none(), v.is_callable();
  if (name == "escaped") return none(), false;
  if (name == "odd" || name == "even") {
    none();
    if (!v.is_number()) fail("unsupported operand type(s) for %: '" + v.type_name() + "' and 'int'");
    const Value m = binary_op("%", v, Value::integer(2));
    return (m.as_float() == 1) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value n = one("num");
    return binary_op("%", v, n).as_float() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, one("other"));
  if (name == "ne" || name == "!=") return !equal(v, one("other"));
  if (name == "lt" || name == "lessthan" || name == "<") return order(v, one("other")) < 0;
  if (name == "le" || name == "<=") return order(v, one("other")) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return order(v, one("other")) > 0;
  if (name == "ge" || name == ">=") return order(v, one("other")) >= 0;
  if (name == "in") return contains(one("seq"), v);
  if (name == "sameas") {
    const Value o = one("other");
    if (v.kind() != o.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool()) return v.as_bool() == o.as_bool();
    return equal(v, o) && (v.is_int() || v.is_string());
  }
  if (name == "lower" || name == "upper") {
    none();
    return py_is(to_str(v), name == "lower" ? "islower" : "isupper");
  }
  fail("no test named '" + name + "'", "ferry's Jinja engine does not know this test");
}

}  // namespace ferry::text::jinja
