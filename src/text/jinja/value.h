// The value model of ferry's Jinja interpreter: what a template expression evaluates to, with Python's semantics
// where chat templates can observe them (jinja2 runs on Python objects).
//
// Kinds: Undefined (jinja2's default Undefined: renders as "", is falsy, iterates as empty, fails when an
// attribute is taken or it is used in arithmetic), None, Bool, Int (int64; overflow is an error), Float, String
// (UTF-8; lengths, indexing and slicing count code points as Python does), List (also tuples, flagged for repr),
// Dict (insertion-ordered, keys of any scalar kind), Namespace (jinja2's mutable namespace()), Callable (builtin
// functions, bound methods, macros). Lists and dicts are shared and never mutated after creation (the chat template
// sandbox is immutable); only namespaces change.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ferry::text::jinja {

class Value;
struct CallArgs;
class Interpreter;

using List = std::vector<Value>;
using DictItems = std::vector<std::pair<Value, Value>>;

/// A function a template can call: builtins, bound methods, macros, caller().
struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> fn;
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() = default;  // undefined
  static Value undefined(std::string name = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(std::int64_t i);
  static Value number(double f);
  static Value string(std::string s);
  static Value list(List items, bool tuple = false);
  static Value dict(DictItems items);
  static Value namespace_(DictItems items);
  static Value callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_tuple() const { return kind_ == Kind::List && tuple_; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_namespace() const { return kind_ == Kind::Namespace; }
  bool is_callable() const { return kind_ == Kind::Callable; }

  bool as_bool() const { return b_; }
  std::int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }
  double as_float() const;  // Int, Float or Bool as a double
  const std::string& as_string() const { return *s_; }
  const List& as_list() const { return *list_; }
  const DictItems& as_dict() const { return *dict_; }  // Dict or Namespace
  DictItems& namespace_items() const { return *dict_; }
  const Callable& as_callable() const { return *fn_; }
  /// For an Undefined: the name it was looked up by ("message.content"), for error messages.
  const std::string& undefined_name() const;

  /// Python's truth value (Undefined, None, 0, 0.0, "", [], {} are false).
  bool truthy() const;
  /// A dict lookup by key (Python equality, so 1 and 1.0 and True are one key); nullptr when absent.
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;

  /// The name of the Python type, for error messages ("str", "int", "list", "dict", "NoneType", "Undefined").
  std::string type_name() const;

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  bool tuple_ = false;
  std::uint32_t depth_ = 0;  // nesting of lists and dicts, bounded so no value is too deep to destroy
  std::int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<DictItems> dict_;
  std::shared_ptr<const Callable> fn_;
};

/// "'x' is undefined" (or the recorded reason) for an Undefined used where jinja2 fails.
std::string undefined_message(const Value& v);

/// Python's == between two values (1 == 1.0 == True, lists and dicts element-wise; Undefined equals Undefined).
bool equal(const Value& a, const Value& b);

/// str(v) as jinja2 prints it: strings as is, Undefined as "", True/False/None, Python float repr, lists and
/// dicts as their Python repr. Depth-guarded.
std::string to_str(const Value& v);
/// repr(v) as Python writes it ('a', "it's", [1, 'b'], {'k': None}, (1,)).
std::string to_repr(const Value& v);
/// Python's repr of a float (shortest round-trip: 1.0, 0.1, 1e-05, 1e+16, inf, nan).
std::string float_repr(double f);

}  // namespace ferry::text::jinja
