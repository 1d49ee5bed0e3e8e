// The builtins of ferry's Jinja engine, one file each: operators (operators.cc), attribute/item access and the
// methods of str/dict/list (access.cc), filters (filters.cc), tests (tests.cc), the global functions transformers
// and jinja2 provide (globals.cc), and JSON in and out (json.cc). They fail with jinja::fail (failure.h).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "text/jinja/interpreter.h"
#include "text/jinja/value.h"

namespace ferry::text::jinja {

// operators.cc
/// + - * / // % ** with Python's semantics (int overflow, division by zero, str/list repetition fail cleanly).
Value binary_op(const std::string& op, const Value& a, const Value& b);
/// == != < <= > >= in notin.
bool compare(const std::string& op, const Value& a, const Value& b);
/// Python's `item in container`.
bool contains(const Value& container, const Value& item);
/// The items a for loop visits: list items, dict keys, string characters; Undefined gives none.
std::vector<Value> iterate(const Value& v);
/// Python's ordering (numbers, strings, lists); fails on unorderable kinds. <0, 0, >0.
int order(const Value& a, const Value& b);

// access.cc
/// obj.name as jinja2's sandbox resolves it (methods of str/dict/list first, then dict keys).
Value get_attr(const Value& obj, const std::string& name);
/// obj[key] (keys, then methods for string keys; out-of-range or missing gives Undefined).
Value get_item(const Value& obj, const Value& key);
/// obj[start:stop:step] on strings, lists and tuples.
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// filters.cc / tests.cc
Value apply_filter(Interpreter& in, const std::string& name, const Value& value, CallArgs& args);
bool apply_test(Interpreter& in, const std::string& name, const Value& value, CallArgs& args);

// globals.cc
/// range, dict, namespace, raise_exception, strftime_now as callables.
std::vector<std::pair<std::string, Value>> global_functions();

// json.cc
/// JSON to template data (objects keep their key order).
Value from_json(const nlohmann::ordered_json& j);
/// Python's json.dumps(v, ensure_ascii, indent, separators, sort_keys): indent < 0 = none.
std::string to_json(const Value& v, bool ensure_ascii, const std::optional<std::string>& indent,
                    const std::string& item_sep, const std::string& key_sep, bool sort_keys);

}  // namespace ferry::text::jinja
