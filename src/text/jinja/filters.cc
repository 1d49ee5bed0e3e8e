// jinja2's builtin filters as chat templates use them, plus transformers' tojson (json.dumps with
// ensure_ascii=False). Signatures and edge cases follow jinja2/filters.py.
#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>

#include "text/jinja/builtins.h"
#include "text/jinja/failure.h"
#include "text/jinja/strings.h"
#include "text/jinja/utf8.h"

namespace ferry::text::jinja {
namespace {

using Bound = std::vector<std::optional<Value>>;

// make_attrgetter: dotted paths, integer parts as indices, `default` for undefined results.
Value get_path(const Value& item, const Value& attribute, const std::optional<Value>& dflt = std::nullopt) {
  Value v = item;
  if (attribute.is_string()) {
    const std::string& path = attribute.as_string();
    std::size_t pos = 0;
    for (;;) {
      const std::size_t dot = path.find('.', pos);
      const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
      const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
      v = digits && part.size() < 18 ? get_item(v, Value::integer(std::stoll(part))) : get_item(v, Value::string(part));
      if (dflt && v.is_undefined()) v = *dflt;
      if (dot == std::string::npos) break;
      pos = dot + 1;
    }
    return v;
  }
  if (attribute.is_none()) return v;
  v = get_item(v, attribute);
  if (dflt && v.is_undefined()) v = *dflt;
  return v;
}

Value lowered(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(py_case(v.as_string(), "lower"));
  return v;
}

std::vector<Value> sorted(std::vector<Value> items, bool reverse, const std::function<Value(const Value&)>& key) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& v : items) keyed.emplace_back(key(v), std::move(v));
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& a, const auto& b) {
    return reverse ? order(b.first, a.first) < 0 : order(a.first, b.first) < 0;
  });
  std::vector<Value> out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return out;
}

std::int64_t length_of(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return static_cast<std::int64_t>(utf8_length(v.as_string()));
    case Value::Kind::List: return static_cast<std::int64_t>(v.as_list().size());
    case Value::Kind::Dict: return static_cast<std::int64_t>(v.as_dict().size());
    default: fail("object of type '" + v.type_name() + "' has no len()");
  }
}

// jinja2's do_title: capitalise each word, words split at whitespace, '-', and opening brackets.
std::string jinja_title(const std::string& s) {
  const std::u32string u = utf8_decode(s);
  auto delim = [](char32_t c) { return is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<'; };
  std::string out;
  std::size_t i = 0;
  while (i < u.size()) {
    std::size_t j = i;
    const bool d = delim(u[i]);
    while (j < u.size() && delim(u[j]) == d) ++j;
    const std::u32string piece = u.substr(i, j - i);
    if (d) {
      out += utf8_encode(piece);
    } else {
      out += py_case(utf8_encode(piece.substr(0, 1)), "upper");
      out += py_case(utf8_encode(piece.substr(1)), "lower");
    }
    i = j;
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// select/reject/selectattr/rejectattr.
Value select(Interpreter& in, const Value& seq, CallArgs& a, bool attr, bool keep) {
  std::size_t next = 0;
  Value attribute;
  if (attr) {
    if (a.args.empty()) fail("Missing parameter for attribute name");
    attribute = a.args[next++];
  }
  std::string test;
  if (next < a.args.size()) {
    if (!a.args[next].is_string()) fail("the test name must be a string");
    test = a.args[next++].as_string();
  }
  CallArgs test_args;
  test_args.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(next), a.args.end());
  test_args.kwargs = a.kwargs;
  List out;
  for (const Value& item : iterate(seq)) {
    in.step();
    const Value v = attr ? get_path(item, attribute) : item;
    CallArgs copy = test_args;
    const bool ok = test.empty() ? v.truthy() : in.test(test, v, copy);
    if (ok == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value map_filter(Interpreter& in, const Value& seq, CallArgs& a) {
  List out;
  const Value* attribute = nullptr;
  std::optional<Value> dflt;
  for (const auto& [k, v] : a.kwargs) {
    if (k == "attribute") attribute = &v;
    else if (k == "default") dflt = v;
  }
  if (attribute || a.args.empty()) {
    if (!attribute) fail("map() needs a filter name or attribute=");
    for (const Value& item : iterate(seq)) {
      in.step();
      out.push_back(get_path(item, *attribute, dflt));
    }
    return Value::list(std::move(out));
  }
  if (!a.args[0].is_string()) fail("map(): the filter name must be a string");
  const std::string name = a.args[0].as_string();
  CallArgs rest;
  rest.args.assign(a.args.begin() + 1, a.args.end());
  rest.kwargs = a.kwargs;
  for (const Value& item : iterate(seq)) {
    in.step();
    CallArgs copy = rest;
    out.push_back(in.filter(name, item, copy));
  }
  return Value::list(std::move(out));
}

Value to_int(const Value& v, const Value& dflt, std::int64_t base) {
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) {
    const double f = v.as_float();
    if (!std::isfinite(f) || std::fabs(f) > 9.2e18) return dflt;
    return Value::integer(static_cast<std::int64_t>(f));
  }
  if (v.is_string()) {
    const std::string s = py_strip(v.as_string(), std::nullopt, true, true);
    std::string digits;
    for (const char c : s) {
      if (c != '_') digits += c;
    }
    if (!digits.empty()) {
      errno = 0;
      char* end = nullptr;
      const long long i = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
      if (errno == 0 && end && *end == '\0') return Value::integer(i);
      // jinja2 falls back to int(float(value)).
      const double f = std::strtod(digits.c_str(), &end);
      if (end && *end == '\0' && std::isfinite(f) && std::fabs(f) < 9.2e18) return Value::integer(static_cast<std::int64_t>(f));
    }
  }
  return dflt;
}

Value to_float(const Value& v, const Value& dflt) {
  if (v.is_number()) return Value::number(v.as_float());
  if (v.is_string()) {
    const std::string s = py_strip(v.as_string(), std::nullopt, true, true);
    char* end = nullptr;
    const double f = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0') return Value::number(f);
  }
  return dflt;
}

std::string indent_filter(const std::string& text, const Value& width, bool first, bool blank) {
  const std::string indention = width.is_string() ? width.as_string() : std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, width.as_int())), ' ');
  const std::vector<std::string> lines = py_splitlines(text + "\n", false);
  std::string rv;
  if (blank) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + indention;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (std::size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
      if (rv.size() > Limits::kMaxOutput) fail("the indented text is too long");
    }
  }
  if (first) rv = indention + rv;
  return rv;
}

// The filters, one function each (aliases share one). Each gets the name it was called by (so an alias such as `d`
// for `default` reports its own name in argument errors), the value left of the `|`, and the call's arguments;
// filters without parameters still bind them, to reject stray arguments.
using Filter = Value (*)(Interpreter& in, const std::string& name, const Value& v, CallArgs& a);

Value filter_tojson(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("tojson", {"ensure_ascii", "indent", "separators", "sort_keys"}, 0);
  const bool ensure_ascii = b[0] && b[0]->truthy();
  std::optional<std::string> indent;
  if (b[1] && !b[1]->is_none()) {
    if (b[1]->is_string()) indent = b[1]->as_string();
    else if (b[1]->is_int())
      indent = std::string(static_cast<std::size_t>(std::clamp<std::int64_t>(b[1]->as_int(), 0, 1024)), ' ');
    else fail("tojson: indent must be an int or a string");
  }
  std::string item_sep = indent ? "," : ", ", key_sep = ": ";
  if (b[2] && !b[2]->is_none()) {
    const std::vector<Value> seps = iterate(*b[2]);
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string())
      fail("tojson: separators must be a pair of strings");
    item_sep = seps[0].as_string();
    key_sep = seps[1].as_string();
  }
  return Value::string(to_json(v, ensure_ascii, indent, item_sep, key_sep, b[3] && b[3]->truthy()));
}

Value filter_trim(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("trim", {"chars"}, 0);
  std::optional<std::string> chars;
  if (b[0] && !b[0]->is_none()) chars = to_str(*b[0]);
  return Value::string(py_strip(to_str(v), chars, true, true));
}

// length, count.
Value filter_length(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  a.bind(name, {}, 0);
  return Value::integer(length_of(v));
}

Value filter_first(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  a.bind(name, {}, 0);
  const std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value filter_last(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  a.bind(name, {}, 0);
  const std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value filter_join(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("join", {"d", "attribute"}, 0);
  const std::string sep = b[0] ? to_str(*b[0]) : "";
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(b[1] && !b[1]->is_none() ? get_path(item, *b[1]) : item);
    if (out.size() > Limits::kMaxOutput) fail("the joined string is too long");
  }
  return Value::string(std::move(out));
}

// default, d.
Value filter_default(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  const Bound b = a.bind(name, {"default_value", "boolean"}, 0);
  const bool boolean = b[1] && b[1]->truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return b[0] ? *b[0] : Value::string("");
  return v;
}

// upper, lower, capitalize: py_case takes the filter's name as the str method to apply.
Value filter_case(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  a.bind(name, {}, 0);
  return Value::string(py_case(to_str(v), name));
}

Value filter_title(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  a.bind(name, {}, 0);
  return Value::string(jinja_title(to_str(v)));
}

Value filter_replace(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("replace", {"old", "new", "count"}, 2);
  return Value::string(
      py_replace(to_str(v), to_str(*b[0]), to_str(*b[1]), b[2] && !b[2]->is_none() ? b[2]->as_int() : -1));
}

// selectattr, rejectattr.
Value filter_selectattr(Interpreter& in, const std::string& name, const Value& v, CallArgs& a) {
  return select(in, v, a, true, name == "selectattr");
}

// select, reject.
Value filter_select(Interpreter& in, const std::string& name, const Value& v, CallArgs& a) {
  return select(in, v, a, false, name == "select");
}

Value filter_map(Interpreter& in, const std::string&, const Value& v, CallArgs& a) { return map_filter(in, v, a); }

Value filter_list(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  a.bind(name, {}, 0);
  return Value::list(iterate(v));
}

// string, safe: there is no markup-safe string type, so `safe` is plain string conversion.
Value filter_string(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  a.bind(name, {}, 0);
  return Value::string(to_str(v));
}

Value filter_int(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("int", {"default", "base"}, 0);
  return to_int(v, b[0] ? *b[0] : Value::integer(0), b[1] ? b[1]->as_int() : 10);
}

Value filter_float(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("float", {"default"}, 0);
  return to_float(v, b[0] ? *b[0] : Value::number(0.0));
}

Value filter_abs(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  a.bind(name, {}, 0);
  if (!v.is_number()) fail("bad operand type for abs(): '" + v.type_name() + "'");
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  if (v.as_int() == INT64_MIN) fail("integer overflow in abs");
  return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
}

Value filter_round(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("round", {"precision", "method"}, 0);
  const std::int64_t precision = b[0] ? b[0]->as_int() : 0;
  const std::string method = b[1] ? to_str(*b[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor") fail("method must be common, ceil or floor");
  if (!v.is_number()) fail("type " + v.type_name() + " doesn't define __round__ method");
  if (method == "common" && !v.is_float()) return Value::integer(v.as_int());
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_float() * scale;
  double r;
  if (method == "ceil") r = std::ceil(x);
  else if (method == "floor") r = std::floor(x);
  else r = std::nearbyint(x);  // Python rounds half to even
  return Value::number(r / scale);
}

Value filter_items(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  a.bind(name, {}, 0);
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) fail("items(): can only get item pairs from a mapping");
  List out;
  for (const auto& [k, item] : v.as_dict()) out.push_back(Value::list({k, item}, true));
  return Value::list(std::move(out));
}

Value filter_dictsort(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("dictsort", {"case_sensitive", "by", "reverse"}, 0);
  const bool cs = b[0] && b[0]->truthy();
  const std::string by = b[1] ? to_str(*b[1]) : "key";
  if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
  if (!v.is_dict()) fail("dictsort(): expected a mapping");
  List pairs;
  for (const auto& [k, item] : v.as_dict()) pairs.push_back(Value::list({k, item}, true));
  const std::size_t pos = by == "key" ? 0 : 1;
  return Value::list(sorted(std::move(pairs), b[2] && b[2]->truthy(),
                            [pos, cs](const Value& p) { return lowered(p.as_list()[pos], cs); }));
}

Value filter_sort(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("sort", {"reverse", "case_sensitive", "attribute"}, 0);
  const bool cs = b[1] && b[1]->truthy();
  const Value attribute = b[2] ? *b[2] : Value::none();
  return Value::list(
      sorted(iterate(v), b[0] && b[0]->truthy(), [&](const Value& x) { return lowered(get_path(x, attribute), cs); }));
}

Value filter_unique(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("unique", {"case_sensitive", "attribute"}, 0);
  const bool cs = b[0] && b[0]->truthy();
  const Value attribute = b[1] ? *b[1] : Value::none();
  List out, seen;
  for (const Value& item : iterate(v)) {
    const Value key = lowered(get_path(item, attribute), cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

// min, max.
Value filter_min_max(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  const Bound b = a.bind(name, {"case_sensitive", "attribute"}, 0);
  const bool cs = b[0] && b[0]->truthy();
  const Value attribute = b[1] ? *b[1] : Value::none();
  const std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  std::size_t best = 0;
  for (std::size_t i = 1; i < items.size(); ++i) {
    const int c = order(lowered(get_path(items[i], attribute), cs), lowered(get_path(items[best], attribute), cs));
    if (name == "min" ? c < 0 : c > 0) best = i;
  }
  return items[best];
}

Value filter_sum(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("sum", {"attribute", "start"}, 0);
  Value total = b[1] ? *b[1] : Value::integer(0);
  const Value attribute = b[0] ? *b[0] : Value::none();
  for (const Value& item : iterate(v)) total = binary_op("+", total, get_path(item, attribute));
  return total;
}

Value filter_reverse(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  a.bind(name, {}, 0);
  if (v.is_string()) {
    std::u32string u = utf8_decode(v.as_string());
    std::reverse(u.begin(), u.end());
    return Value::string(utf8_encode(u));
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value filter_indent(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("indent", {"width", "first", "blank"}, 0);
  return Value::string(
      indent_filter(to_str(v), b[0] ? *b[0] : Value::integer(4), b[1] && b[1]->truthy(), b[2] && b[2]->truthy()));
}

// escape, e, forceescape.
Value filter_escape(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  a.bind(name, {}, 0);
  return Value::string(html_escape(to_str(v)));
}

Value filter_wordcount(Interpreter&, const std::string& name, const Value& v, CallArgs& a) {
  a.bind(name, {}, 0);
  std::int64_t words = 0;
  bool in_word = false;
  for (const char32_t c : utf8_decode(to_str(v))) {
    const bool w = c == '_' || py_is(utf8_encode(std::u32string(1, c)), "isalnum");
    if (w && !in_word) ++words;
    in_word = w;
  }
  return Value::integer(words);
}

Value filter_batch(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("batch", {"linecount", "fill_with"}, 1);
  const std::int64_t n = b[0]->as_int();
  if (n <= 0) fail("batch(): linecount must be positive");
  List out, tmp;
  for (const Value& item : iterate(v)) {
    if (static_cast<std::int64_t>(tmp.size()) == n) {
      out.push_back(Value::list(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(item);
  }
  if (!tmp.empty()) {
    if (b[1] && !b[1]->is_none()) {
      while (static_cast<std::int64_t>(tmp.size()) < n) tmp.push_back(*b[1]);
    }
    out.push_back(Value::list(std::move(tmp)));
  }
  return Value::list(std::move(out));
}

Value filter_attr(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("attr", {"name"}, 1);
  return get_attr(v, to_str(*b[0]));
}

Value filter_center(Interpreter&, const std::string&, const Value& v, CallArgs& a) {
  const Bound b = a.bind("center", {"width"}, 0);
  const std::int64_t width = std::min<std::int64_t>(b[0] ? b[0]->as_int() : 80, 1 << 20);
  const std::string s = to_str(v);
  const auto len = static_cast<std::int64_t>(utf8_length(s));
  if (width <= len) return Value::string(s);
  const std::int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
  return Value::string(std::string(static_cast<std::size_t>(left), ' ') + s +
                       std::string(static_cast<std::size_t>(pad - left), ' '));
}

// Every filter name, each alias after the filter it stands for.
const std::unordered_map<std::string_view, Filter>& filters() {
  static const std::unordered_map<std::string_view, Filter> table = {
      {"tojson", filter_tojson},
      {"trim", filter_trim},
      {"length", filter_length},
      {"count", filter_length},
      {"first", filter_first},
      {"last", filter_last},
      {"join", filter_join},
      {"default", filter_default},
      {"d", filter_default},
      {"upper", filter_case},
      {"lower", filter_case},
      {"capitalize", filter_case},
      {"title", filter_title},
      {"replace", filter_replace},
      {"selectattr", filter_selectattr},
      {"rejectattr", filter_selectattr},
      {"select", filter_select},
      {"reject", filter_select},
      {"map", filter_map},
      {"list", filter_list},
      {"string", filter_string},
      {"safe", filter_string},
      {"int", filter_int},
      {"float", filter_float},
      {"abs", filter_abs},
      {"round", filter_round},
      {"items", filter_items},
      {"dictsort", filter_dictsort},
      {"sort", filter_sort},
      {"unique", filter_unique},
      {"min", filter_min_max},
      {"max", filter_min_max},
      {"sum", filter_sum},
      {"reverse", filter_reverse},
      {"indent", filter_indent},
      {"escape", filter_escape},
      {"e", filter_escape},
      {"forceescape", filter_escape},
      {"wordcount", filter_wordcount},
      {"batch", filter_batch},
      {"attr", filter_attr},
      {"center", filter_center},
  };
  return table;
}

}  // namespace

Value apply_filter(Interpreter& in, const std::string& name, const Value& v, CallArgs& a) {
  const auto it = filters().find(name);
  if (it == filters().end()) fail("no filter named '" + name + "'", "ferry's Jinja engine does not know this filter");
  return it->second(in, name, v, a);
}

}  // namespace ferry::text::jinja
