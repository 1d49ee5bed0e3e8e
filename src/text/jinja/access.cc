// Attribute, item and slice access, and the methods of str, dict and list that the sandbox allows (mutating
// methods of lists and dicts fail as jinja2's ImmutableSandboxedEnvironment makes them fail).
#include <utf8proc.h>

#include "text/jinja/builtins.h"
#include "text/jinja/failure.h"
#include "text/jinja/strings.h"
#include "text/jinja/utf8.h"

namespace ferry::text::jinja {
namespace {

[[noreturn]] void undefined_use(const Value& obj) {
  fail(undefined_message(obj),
       "guard it with `is defined`, or check the names the template expects (messages, tools, add_generation_prompt, ...)");
}

Value method(const Value& self, const std::string& name, std::function<Value(const Value&, CallArgs&)> fn) {
  return Value::callable(name, [self, fn](Interpreter&, CallArgs& a) { return fn(self, a); });
}

Value unsafe(const Value& self, const std::string& name) {
  const std::string type = self.type_name();
  return Value::callable(name, [type, name](Interpreter&, CallArgs&) -> Value {
    fail("access to attribute '" + name + "' of '" + type + "' object is unsafe.",
         "chat templates run in an immutable sandbox: build a new list with + or a namespace instead");
  });
}

std::optional<std::string> opt_str(const std::optional<Value>& v, const std::string& fname) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) fail(fname + "() argument must be str or None, not " + v->type_name());
  return v->as_string();
}

Value string_method(const Value& self, const std::string& name) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return method(self, name, [name](const Value& s, CallArgs& a) {
      const auto chars = opt_str(a.bind(name, {"chars"}, 0)[0], name);
      return Value::string(py_strip(s.as_string(), chars, name != "rstrip", name != "lstrip"));
    });
  }
  if (name == "split" || name == "rsplit") {
    return method(self, name, [name](const Value& s, CallArgs& a) {
      const auto b = a.bind(name, {"sep", "maxsplit"}, 0);
      const auto sep = opt_str(b[0], name);
      const std::int64_t maxsplit = b[1] ? b[1]->as_int() : -1;
      List out;
      for (std::string& part : py_split(s.as_string(), sep, maxsplit, name == "rsplit")) out.push_back(Value::string(std::move(part)));
      return Value::list(std::move(out));
    });
  }
  if (name == "splitlines") {
    return method(self, name, [](const Value& s, CallArgs& a) {
      const auto b = a.bind("splitlines", {"keepends"}, 0);
      List out;
      for (std::string& part : py_splitlines(s.as_string(), b[0] && b[0]->truthy())) out.push_back(Value::string(std::move(part)));
      return Value::list(std::move(out));
    });
  }
  if (name == "startswith" || name == "endswith") {
    return method(self, name, [name](const Value& s, CallArgs& a) {
      const auto b = a.bind(name, {"prefix", "start", "end"}, 1);
      std::vector<std::string> options;
      if (b[0]->is_string()) {
        options.push_back(b[0]->as_string());
      } else if (b[0]->is_tuple()) {
        for (const Value& v : b[0]->as_list()) {
          if (!v.is_string()) fail("tuple for " + name + " must only contain str, not " + v.type_name());
          options.push_back(v.as_string());
        }
      } else {
        fail(name + " first arg must be str or a tuple of str, not " + b[0]->type_name());
      }
      std::string text = s.as_string();
      if ((b[1] && !b[1]->is_none()) || (b[2] && !b[2]->is_none())) {
        text = to_str(get_slice(s, b[1] ? *b[1] : Value::none(), b[2] ? *b[2] : Value::none(), Value::none()));
      }
      for (const std::string& o : options) {
        if (o.size() > text.size()) continue;
        if (name == "startswith" ? text.compare(0, o.size(), o) == 0 : text.compare(text.size() - o.size(), o.size(), o) == 0)
          return Value::boolean(true);
      }
      return Value::boolean(false);
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "swapcase") {
    return method(self, name, [name](const Value& s, CallArgs& a) {
      a.bind(name, {}, 0);
      return Value::string(py_case(s.as_string(), name));
    });
  }
  if (name == "replace") {
    return method(self, name, [](const Value& s, CallArgs& a) {
      const auto b = a.bind("replace", {"old", "new", "count"}, 2);
      if (!b[0]->is_string() || !b[1]->is_string()) fail("replace() arguments must be str");
      return Value::string(py_replace(s.as_string(), b[0]->as_string(), b[1]->as_string(), b[2] ? b[2]->as_int() : -1));
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return method(self, name, [name](const Value& s, CallArgs& a) {
      const auto b = a.bind(name, {"sub", "start", "end"}, 1);
      if (!b[0]->is_string()) fail("must be str, not " + b[0]->type_name());
      const std::u32string text = utf8_decode(s.as_string()), sub = utf8_decode(b[0]->as_string());
      const auto n = static_cast<std::int64_t>(text.size());
      auto clamp = [n](std::int64_t i) { return i < 0 ? std::max<std::int64_t>(0, i + n) : std::min(i, n); };
      const std::int64_t start = b[1] && !b[1]->is_none() ? clamp(b[1]->as_int()) : 0;
      const std::int64_t end = b[2] && !b[2]->is_none() ? clamp(b[2]->as_int()) : n;
      if (name == "count") {
        if (start > end) return Value::integer(0);
        if (sub.empty()) return Value::integer(end - start + 1);
        std::int64_t count = 0;
        for (std::int64_t i = start; i + static_cast<std::int64_t>(sub.size()) <= end;) {
          if (text.compare(static_cast<std::size_t>(i), sub.size(), sub) == 0) {
            ++count;
            i += static_cast<std::int64_t>(sub.size());
          } else {
            ++i;
          }
        }
        return Value::integer(count);
      }
      std::int64_t found = -1;
      const bool reverse = name[0] == 'r';
      for (std::int64_t i = reverse ? end - static_cast<std::int64_t>(sub.size()) : start;
           reverse ? i >= start : i + static_cast<std::int64_t>(sub.size()) <= end; reverse ? --i : ++i) {
        if (text.compare(static_cast<std::size_t>(i), sub.size(), sub) == 0) {
          found = i;
          break;
        }
      }
      if (found < 0 && (name == "index" || name == "rindex")) fail("substring not found");
      return Value::integer(found);
    });
  }
  if (name == "join") {
    return method(self, name, [](const Value& s, CallArgs& a) {
      const auto b = a.bind("join", {"iterable"}, 1);
      std::string out;
      bool first = true;
      for (const Value& v : iterate(*b[0])) {
        if (!v.is_string()) fail("sequence item: expected str instance, " + v.type_name() + " found");
        if (!first) out += s.as_string();
        first = false;
        out += v.as_string();
        if (out.size() > Limits::kMaxOutput) fail("the joined string is too long");
      }
      return Value::string(std::move(out));
    });
  }
  if (name == "format") {
    return method(self, name, [](const Value& s, CallArgs& a) { return Value::string(py_format(s.as_string(), a)); });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isupper" || name == "islower" ||
      name == "isalnum" || name == "isnumeric" || name == "isdecimal") {
    return method(self, name, [name](const Value& s, CallArgs& a) {
      a.bind(name, {}, 0);
      return Value::boolean(py_is(s.as_string(), name));
    });
  }
  return Value::undefined("str." + name);
}

Value dict_method(const Value& self, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    return method(self, name, [name](const Value& d, CallArgs& a) {
      a.bind(name, {}, 0);
      List out;
      for (const auto& [k, v] : d.as_dict()) {
        if (name == "items") out.push_back(Value::list({k, v}, true));
        else out.push_back(name == "keys" ? k : v);
      }
      return Value::list(std::move(out));
    });
  }
  if (name == "get") {
    return method(self, name, [](const Value& d, CallArgs& a) {
      const auto b = a.bind("get", {"key", "default"}, 1);
      const Value* v = d.find(*b[0]);
      return v ? *v : (b[1] ? *b[1] : Value::none());
    });
  }
  if (name == "copy") return method(self, name, [](const Value& d, CallArgs&) { return Value::dict(d.as_dict()); });
  if (name == "clear" || name == "pop" || name == "popitem" || name == "setdefault" || name == "update") return unsafe(self, name);
  return Value::undefined();
}

Value list_method(const Value& self, const std::string& name) {
  if (name == "index" || name == "count") {
    return method(self, name, [name](const Value& l, CallArgs& a) {
      const auto b = a.bind(name, {"value"}, 1);
      std::int64_t count = 0;
      for (std::size_t i = 0; i < l.as_list().size(); ++i) {
        if (equal(l.as_list()[i], *b[0])) {
          if (name == "index") return Value::integer(static_cast<std::int64_t>(i));
          ++count;
        }
      }
      if (name == "index") fail(to_repr(*b[0]) + " is not in list");
      return Value::integer(count);
    });
  }
  if (!self.is_tuple()) {
    if (name == "copy") return method(self, name, [](const Value& l, CallArgs&) { return Value::list(l.as_list()); });
    if (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
        name == "reverse" || name == "sort" || name == "clear")
      return unsafe(self, name);
  }
  return Value::undefined();
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::Undefined: undefined_use(obj);
    case Value::Kind::String: {
      Value m = string_method(obj, name);
      if (m.is_undefined()) return Value::undefined("str object has no attribute '" + name + "'");
      return m;
    }
    case Value::Kind::Dict: {
      Value m = dict_method(obj, name);
      if (!m.is_undefined()) return m;
      const Value* v = obj.find(name);
      return v ? *v : Value::undefined("dict object has no attribute '" + name + "'");
    }
    case Value::Kind::Namespace: {
      const Value* v = obj.find(name);
      return v ? *v : Value::undefined("namespace has no attribute '" + name + "'");
    }
    case Value::Kind::List: {
      Value m = list_method(obj, name);
      if (!m.is_undefined()) return m;
      return Value::undefined(obj.type_name() + " object has no attribute '" + name + "'");
    }
    default: return Value::undefined(obj.type_name() + " object has no attribute '" + name + "'");
  }
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::Undefined: undefined_use(obj);
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
      if (key.is_list() && !key.is_tuple()) fail("unhashable type: 'list'");
      const Value* v = obj.find(key);
      if (v) return *v;
      break;
    }
    case Value::Kind::List:
    case Value::Kind::String: {
      if (!key.is_int() && !key.is_bool()) break;
      std::int64_t i = key.as_int();
      if (obj.is_list()) {
        const auto n = static_cast<std::int64_t>(obj.as_list().size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.as_list()[static_cast<std::size_t>(i)];
        return Value::undefined(obj.type_name() + " object has no element " + std::to_string(key.as_int()));
      }
      const std::u32string s = utf8_decode(obj.as_string());
      const auto n = static_cast<std::int64_t>(s.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) {
        std::string one;
        utf8_append(one, s[static_cast<std::size_t>(i)]);
        return Value::string(one);
      }
      return Value::undefined("str object has no element " + std::to_string(key.as_int()));
    }
    default: break;
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return Value::undefined(obj.type_name() + " object has no element " + to_repr(key));
}

Value get_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) undefined_use(obj);
  if (!obj.is_list() && !obj.is_string()) return Value::undefined(obj.type_name() + " object is not subscriptable");
  auto index = [](const Value& v, const char* what) -> std::optional<std::int64_t> {
    if (v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) fail(std::string("slice ") + what + " must be an integer or None");
    return v.as_int();
  };
  const auto start_o = index(start_v, "indices"), stop_o = index(stop_v, "indices"), step_o = index(step_v, "indices");
  const std::int64_t step = step_o.value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  std::u32string text;
  if (obj.is_string()) text = utf8_decode(obj.as_string());
  const auto n = static_cast<std::int64_t>(obj.is_string() ? text.size() : obj.as_list().size());
  auto adjust = [n, step](std::optional<std::int64_t> v, bool is_start) {
    if (!v) return step > 0 ? (is_start ? std::int64_t{0} : n) : (is_start ? n - 1 : std::int64_t{-1});
    std::int64_t i = *v;
    if (i < 0) {
      i += n;
      if (i < 0) i = step > 0 ? 0 : -1;
    } else if (i >= n) {
      i = step > 0 ? n : n - 1;
    }
    return i;
  };
  const std::int64_t start = adjust(start_o, true), stop = adjust(stop_o, false);
  std::vector<std::size_t> picks;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) picks.push_back(static_cast<std::size_t>(i));
  if (obj.is_string()) {
    std::u32string out;
    for (const std::size_t i : picks) out.push_back(text[i]);
    return Value::string(utf8_encode(out));
  }
  List out;
  for (const std::size_t i : picks) out.push_back(obj.as_list()[i]);
  return Value::list(std::move(out), obj.is_tuple());
}

}  // namespace ferry::text::jinja
