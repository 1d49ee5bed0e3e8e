// The Jinja interpreter: renders a parsed template against a set of variables with jinja2's semantics as
// transformers configures it (ImmutableSandboxedEnvironment: lists and dicts cannot be mutated, only namespaces).
// Scopes follow jinja2: each for-loop iteration and macro call gets its own frame, if-blocks do not, and `set` binds
// in the innermost frame. Every render is bounded (output size, loop iterations, macro call depth).
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace ferry::text::jinja {

/// The arguments of a call: positional, then keyword.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;

  /// Binds to a Python signature `fname(names...)`: positional arguments fill `names` in order, keywords by name;
  /// the first `required` must be given. Absent optional parameters are nullopt. Unknown keywords, too many
  /// arguments and missing required ones fail with Python's message.
  std::vector<std::optional<Value>> bind(const std::string& fname, const std::vector<const char*>& names,
                                         std::size_t required) const;
};

/// A scope: variables bound in it and the scope it reads through to.
struct Frame {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Frame> parent;

  const Value* lookup(const std::string& name) const;
  void set(const std::string& name, Value v);
};

struct RenderSettings {
  std::optional<std::tm> now;  // strftime_now's clock; nullopt = the local time
};

class Interpreter {
 public:
  /// `name` prefixes error locations ("chat_template.jinja").
  Interpreter(const Body& body, const std::string& name, RenderSettings settings);

  /// Renders with `globals` as the outermost frame. Failures throw ferry::Error (problem, name:line:column, hint).
  std::string render(std::shared_ptr<Frame> globals);

  /// Calls a callable value (builtins call back into macros and filters through this).
  Value call(const Value& fn, CallArgs& args);
  /// Applies the filter `name` (map(), select() and friends use it).
  Value filter(const std::string& name, const Value& value, CallArgs& args);
  /// Applies the test `name`.
  bool test(const std::string& name, const Value& value, CallArgs& args);
  /// One loop iteration or call; fails past Limits::kMaxSteps.
  void step();
  const RenderSettings& settings() const { return settings_; }
  /// Namespaces created by this render: emptied when it ends, so none can keep itself alive through a cycle.
  void track_namespace(const Value& ns) { namespaces_.push_back(ns); }

 private:
  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body, const std::shared_ptr<Frame>& frame, std::string& out);
  Flow exec_stmt(const Stmt& s, const std::shared_ptr<Frame>& frame, std::string& out);
  Flow exec_for(const Stmt& s, const std::shared_ptr<Frame>& frame, std::string& out);
  void assign(const std::vector<std::string>& targets, const Value& v, Frame& frame);
  Value eval(const Expr& e, const std::shared_ptr<Frame>& frame);
  Value eval_inner(const Expr& e, const std::shared_ptr<Frame>& frame);
  Value call_value(const Value& fn, CallArgs& args);
  void eval_args(const std::vector<Arg>& args, const std::shared_ptr<Frame>& frame, CallArgs& out);
  Value make_macro(const Stmt& s, const std::shared_ptr<Frame>& frame);
  Value run_macro(const Stmt& s, const std::shared_ptr<Frame>& defined_in, CallArgs& args, const Value* caller);
  void write(std::string& out, const std::string& text);

  const Body& body_;
  const std::string& name_;
  RenderSettings settings_;
  std::size_t steps_ = 0;
  std::size_t call_depth_ = 0;
  std::size_t eval_depth_ = 0;
  int line_ = 0;
  int column_ = 0;
  std::vector<Value> namespaces_;
};

}  // namespace ferry::text::jinja
