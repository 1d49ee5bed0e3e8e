// The global functions a chat template can call: jinja2's range (with the sandbox's MAX_RANGE), dict and
// namespace, and transformers' raise_exception and strftime_now.
#include <ctime>

#include "text/jinja/builtins.h"
#include "text/jinja/failure.h"

namespace ferry::text::jinja {
namespace {

Value range(Interpreter& in, CallArgs& a) {
  if (!a.kwargs.empty()) fail("range() takes no keyword arguments");
  if (a.args.empty() || a.args.size() > 3) fail("range expected at least 1 argument, got " + std::to_string(a.args.size()));
  for (const Value& v : a.args) {
    if (!v.is_int() && !v.is_bool()) fail("'" + v.type_name() + "' object cannot be interpreted as an integer");
  }
  std::int64_t start = 0, stop = 0, step = 1;
  if (a.args.size() == 1) {
    stop = a.args[0].as_int();
  } else {
    start = a.args[0].as_int();
    stop = a.args[1].as_int();
    if (a.args.size() == 3) step = a.args[2].as_int();
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  // Count without overflow: (stop - start) in 128 bits.
  const __int128 span = static_cast<__int128>(stop) - start;
  __int128 count = 0;
  if (step > 0 && span > 0) count = (span + step - 1) / step;
  if (step < 0 && span < 0) count = (-span + (-static_cast<__int128>(step)) - 1) / -static_cast<__int128>(step);
  if (count > Limits::kMaxRange) {
    fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  List items;
  for (__int128 i = 0; i < count; ++i) {
    in.step();
    items.push_back(Value::integer(static_cast<std::int64_t>(start + i * step)));
  }
  return Value::list(std::move(items));
}

DictItems dict_items(const std::string& fname, CallArgs& a) {
  if (a.args.size() > 1) fail(fname + " expected at most 1 argument, got " + std::to_string(a.args.size()));
  DictItems items;
  auto put = [&items](Value k, Value v) {
    for (auto& [old_k, old_v] : items) {
      if (equal(old_k, k)) {
        old_v = std::move(v);
        return;
      }
    }
    items.emplace_back(std::move(k), std::move(v));
  };
  if (!a.args.empty()) {
    const Value& src = a.args[0];
    if (src.is_dict() || src.is_namespace()) {
      for (const auto& [k, v] : src.as_dict()) put(k, v);
    } else {
      for (const Value& pair : iterate(src)) {
        const std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2) fail("dictionary update sequence element has length " + std::to_string(kv.size()) + "; 2 is required");
        put(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : a.kwargs) put(Value::string(k), v);
  return items;
}

}  // namespace

std::vector<std::pair<std::string, Value>> global_functions() {
  std::vector<std::pair<std::string, Value>> g;
  g.emplace_back("range", Value::callable("range", range));
  g.emplace_back("dict", Value::callable("dict", [](Interpreter&, CallArgs& a) { return Value::dict(dict_items("dict", a)); }));
  g.emplace_back("namespace", Value::callable("namespace", [](Interpreter& in, CallArgs& a) {
                   DictItems items = dict_items("namespace", a);
                   for (const auto& [k, v] : items) {
                     if (k.is_string() && !k.as_string().empty() && k.as_string()[0] == '_') {
                       fail("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
                            k.as_string() + "'. Please rename the attribute.");
                     }
                   }
                   Value ns = Value::namespace_(std::move(items));
                   in.track_namespace(ns);
                   return ns;
                 }));
  g.emplace_back("raise_exception", Value::callable("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
                   const auto b = a.bind("raise_exception", {"message"}, 1);
                   throw Failure{to_str(*b[0]), {}, true};
                 }));
  g.emplace_back("strftime_now", Value::callable("strftime_now", [](Interpreter& in, CallArgs& a) {
                   const auto b = a.bind("strftime_now", {"format"}, 1);
                   if (!b[0]->is_string()) fail("strftime() argument 1 must be str, not " + b[0]->type_name());
                   std::tm tm{};
                   if (in.settings().now) {
                     tm = *in.settings().now;
                   } else {
                     const std::time_t t = std::time(nullptr);
                     localtime_r(&t, &tm);
                   }
                   const std::string& fmt = b[0]->as_string();
                   if (fmt.empty()) return Value::string("");
                   if (fmt.size() > 1024) fail("strftime format too long");
                   std::string buf(fmt.size() * 64 + 64, '\0');
                   const std::size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
                   buf.resize(n);
                   return Value::string(buf);
                 }));
  return g;
}

}  // namespace ferry::text::jinja
