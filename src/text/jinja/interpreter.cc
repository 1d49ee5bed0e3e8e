// The Jinja interpreter: statement execution, scopes, macros and the render limits. Expressions are evaluated in
// interpreter_expressions.cc.
#include "text/jinja/interpreter.h"

#include "ferry/core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/failure.h"
#include "text/jinja/lexer.h"

namespace ferry::text::jinja {

std::vector<std::optional<Value>> CallArgs::bind(const std::string& fname, const std::vector<const char*>& names,
                                                 std::size_t required) const {
  std::vector<std::optional<Value>> out(names.size());
  if (args.size() > names.size()) {
    fail(fname + "() takes at most " + std::to_string(names.size()) + " arguments (" + std::to_string(args.size()) +
         " given)");
  }
  for (std::size_t i = 0; i < args.size(); ++i) out[i] = args[i];
  for (const auto& [k, v] : kwargs) {
    bool found = false;
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (k == names[i]) {
        if (out[i]) fail(fname + "() got multiple values for argument '" + k + "'");
        out[i] = v;
        found = true;
      }
    }
    if (!found) fail(fname + "() got an unexpected keyword argument '" + k + "'");
  }
  for (std::size_t i = 0; i < required; ++i) {
    if (!out[i]) fail(fname + "() missing required argument '" + names[i] + "'");
  }
  return out;
}

const Value* Frame::lookup(const std::string& name) const {
  for (const Frame* f = this; f; f = f->parent.get()) {
    for (const auto& [k, v] : f->vars) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Frame::set(const std::string& name, Value v) {
  for (auto& [k, old] : vars) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

Interpreter::Interpreter(const Body& body, const std::string& name, RenderSettings settings)
    : body_(body), name_(name), settings_(std::move(settings)) {}

std::string Interpreter::render(std::shared_ptr<Frame> globals) {
  struct ClearNamespaces {
    std::vector<Value>& namespaces;
    ~ClearNamespaces() {
      for (const Value& ns : namespaces) ns.namespace_items().clear();
      namespaces.clear();
    }
  } clear{namespaces_};
  struct Budgets {
    std::size_t strings = g_string_budget, lists = g_list_budget;
    Budgets() {
      g_string_budget = Limits::kStringBudget;
      g_list_budget = Limits::kListBudget;
    }
    ~Budgets() {
      g_string_budget = strings;
      g_list_budget = lists;
    }
  } budgets;
  std::string out;
  try {
    exec(body_, globals, out);
  } catch (const Failure& f) {
    std::string hint = f.hint;
    if (hint.empty() && f.raised) hint = "the chat template refused these messages (its raise_exception())";
    throw Error(f.problem, location(name_, line_, column_), hint);
  }
  return out;
}

void Interpreter::step() {
  if (++steps_ > Limits::kMaxSteps) {
    fail("the template ran more than " + std::to_string(Limits::kMaxSteps) + " loop iterations and calls",
         "a chat template should not need that many; is a loop unbounded?");
  }
}

void Interpreter::write(std::string& out, const std::string& text) {
  if (out.size() + text.size() > Limits::kMaxOutput) {
    fail("the rendered text exceeds " + std::to_string(Limits::kMaxOutput) + " bytes");
  }
  out += text;
}

Interpreter::Flow Interpreter::exec(const Body& body, const std::shared_ptr<Frame>& frame, std::string& out) {
  for (const StmtPtr& s : body) {
    const Flow f = exec_stmt(*s, frame, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

void Interpreter::assign(const std::vector<std::string>& targets, const Value& v, Frame& frame) {
  if (targets.size() == 1) {
    frame.set(targets[0], v);
    return;
  }
  const std::vector<Value> items = iterate(v);
  if (items.size() != targets.size()) {
    fail(items.size() < targets.size()
             ? "not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                   std::to_string(items.size()) + ")"
             : "too many values to unpack (expected " + std::to_string(targets.size()) + ")");
  }
  for (std::size_t i = 0; i < targets.size(); ++i) frame.set(targets[i], items[i]);
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, const std::shared_ptr<Frame>& frame, std::string& out) {
  line_ = s.line;
  column_ = s.column;
  switch (s.kind) {
    case Stmt::Kind::Text: write(out, s.text); return Flow::Normal;
    case Stmt::Kind::Print: write(out, to_str(eval(*s.expr, frame))); return Flow::Normal;
    case Stmt::Kind::If:
      for (std::size_t i = 0; i < s.conditions.size(); ++i) {
        if (eval(*s.conditions[i], frame).truthy()) return exec(s.bodies[i], frame, out);
      }
      return exec(s.else_body, frame, out);
    case Stmt::Kind::For: return exec_for(s, frame, out);
    case Stmt::Kind::Set: {
      const Value v = eval(*s.expr, frame);
      if (!s.attr.empty()) {
        const Value* ns = frame->lookup(s.targets[0]);
        line_ = s.line;
        column_ = s.column;
        if (!ns || !ns->is_namespace()) fail("cannot assign attribute on non-namespace object");
        if (!s.attr.empty() && s.attr[0] == '_') {
          fail("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" + s.attr + "'.");
        }
        DictItems& items = ns->namespace_items();
        for (auto& [k, old] : items) {
          if (k.is_string() && k.as_string() == s.attr) {
            old = v;
            return Flow::Normal;
          }
        }
        items.emplace_back(Value::string(s.attr), v);
        return Flow::Normal;
      }
      assign(s.targets, v, *frame);
      return Flow::Normal;
    }
    case Stmt::Kind::SetBlock: {
      std::string captured;
      exec(s.body, frame, captured);
      Value v = Value::string(std::move(captured));
      if (s.filter) {
        auto scope = std::make_shared<Frame>();
        scope->parent = frame;
        scope->vars.emplace_back("\x01block", v);
        v = eval(*s.filter, scope);
      }
      frame->set(s.targets[0], v);
      return Flow::Normal;
    }
    case Stmt::Kind::FilterBlock: {
      std::string captured;
      exec(s.body, frame, captured);
      auto scope = std::make_shared<Frame>();
      scope->parent = frame;
      scope->vars.emplace_back("\x01block", Value::string(std::move(captured)));
      write(out, to_str(eval(*s.filter, scope)));
      return Flow::Normal;
    }
    case Stmt::Kind::Macro: frame->set(s.name, make_macro(s, frame)); return Flow::Normal;
    case Stmt::Kind::CallBlock: {
      const Expr& call = *s.expr;
      Value fn = eval(*call.items[0], frame);
      CallArgs args;
      eval_args(call.args, frame, args);
      const Stmt* block = &s;
      std::shared_ptr<Frame> defined_in = frame;
      Value caller = Value::callable("caller", [block, defined_in](Interpreter& in, CallArgs& a) {
        return in.run_macro(*block, defined_in, a, nullptr);
      });
      args.kwargs.emplace_back("caller", caller);
      line_ = s.line;
      column_ = s.column;
      write(out, to_str(call_value(fn, args)));
      return Flow::Normal;
    }
    case Stmt::Kind::Generation: return exec(s.body, frame, out);
    case Stmt::Kind::Break: return Flow::Break;
    case Stmt::Kind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const std::shared_ptr<Frame>& frame, std::string& out) {
  const Value iterable = eval(*s.expr, frame);
  std::vector<Value> items = iterate(iterable);
  if (s.cond) {
    std::vector<Value> kept;
    for (Value& item : items) {
      step();
      auto scope = std::make_shared<Frame>();
      scope->parent = frame;
      assign(s.targets, item, *scope);
      if (eval(*s.cond, scope).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(s.else_body, frame, out);
  const auto n = static_cast<std::int64_t>(items.size());
  // loop.cycle(...): one callable per loop reading the current iteration (cheaper than one per iteration).
  auto position = std::make_shared<std::int64_t>(0);
  const Value cycle = Value::callable("cycle", [position](Interpreter&, CallArgs& a) {
    if (a.args.empty()) fail("no items for cycling given");
    return a.args[static_cast<std::size_t>(*position) % a.args.size()];
  });
  for (std::int64_t i = 0; i < n; ++i) {
    step();
    auto scope = std::make_shared<Frame>();
    scope->parent = frame;
    static const Value kIndex = Value::string("index"), kIndex0 = Value::string("index0"),
                       kRevindex = Value::string("revindex"), kRevindex0 = Value::string("revindex0"),
                       kFirst = Value::string("first"), kLast = Value::string("last"), kLength = Value::string("length"),
                       kDepth = Value::string("depth"), kDepth0 = Value::string("depth0"),
                       kPrevitem = Value::string("previtem"), kNextitem = Value::string("nextitem"),
                       kCycle = Value::string("cycle");
    DictItems loop{
        {kIndex, Value::integer(i + 1)},      {kIndex0, Value::integer(i)},
        {kRevindex, Value::integer(n - i)},   {kRevindex0, Value::integer(n - i - 1)},
        {kFirst, Value::boolean(i == 0)},     {kLast, Value::boolean(i == n - 1)},
        {kLength, Value::integer(n)},         {kDepth, Value::integer(1)},
        {kDepth0, Value::integer(0)},
    };
    if (i > 0) loop.emplace_back(kPrevitem, items[static_cast<std::size_t>(i - 1)]);
    if (i + 1 < n) loop.emplace_back(kNextitem, items[static_cast<std::size_t>(i + 1)]);
    *position = i;
    loop.emplace_back(kCycle, cycle);
    scope->vars.emplace_back("loop", Value::dict(std::move(loop)));
    assign(s.targets, items[static_cast<std::size_t>(i)], *scope);
    const Flow f = exec(s.body, scope, out);
    if (f == Flow::Break) break;
  }
  return Flow::Normal;
}

Value Interpreter::make_macro(const Stmt& s, const std::shared_ptr<Frame>& frame) {
  const Stmt* macro = &s;
  // The macro sees the frame it was defined in; a weak pointer keeps a macro stored in its own frame from
  // keeping that frame alive forever.
  std::weak_ptr<Frame> defined_in = frame;
  return Value::callable(s.name, [macro, defined_in](Interpreter& in, CallArgs& a) {
    std::shared_ptr<Frame> scope = defined_in.lock();
    if (!scope) fail("macro '" + macro->name + "' called after its scope ended");
    Value caller;
    const Value* caller_ptr = nullptr;
    for (auto it = a.kwargs.begin(); it != a.kwargs.end(); ++it) {
      if (it->first == "caller") {
        caller = it->second;
        caller_ptr = &caller;
        a.kwargs.erase(it);
        break;
      }
    }
    return in.run_macro(*macro, scope, a, caller_ptr);
  });
}

Value Interpreter::run_macro(const Stmt& s, const std::shared_ptr<Frame>& defined_in, CallArgs& args,
                             const Value* caller) {
  step();
  if (call_depth_ >= Limits::kMaxCallDepth) {
    fail("macro calls nested more than " + std::to_string(Limits::kMaxCallDepth) + " deep",
         "is a macro calling itself without end?");
  }
  const std::string fname = s.kind == Stmt::Kind::Macro ? s.name : "caller";
  if (args.args.size() > s.params.size()) {
    fail("macro '" + fname + "' takes not more than " + std::to_string(s.params.size()) + " argument(s)");
  }
  auto scope = std::make_shared<Frame>();
  scope->parent = defined_in;
  std::vector<bool> given(s.params.size(), false);
  for (std::size_t i = 0; i < args.args.size(); ++i) {
    scope->set(s.params[i].name, args.args[i]);
    given[i] = true;
  }
  for (const auto& [k, v] : args.kwargs) {
    bool found = false;
    for (std::size_t i = 0; i < s.params.size(); ++i) {
      if (s.params[i].name == k) {
        scope->set(k, v);
        given[i] = true;
        found = true;
      }
    }
    if (!found) fail("macro '" + fname + "' takes no keyword argument '" + k + "'");
  }
  ++call_depth_;
  struct Restore {
    std::size_t& depth;
    ~Restore() { --depth; }
  } restore{call_depth_};
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    if (given[i]) continue;
    scope->set(s.params[i].name,
               s.params[i].default_value ? eval(*s.params[i].default_value, scope) : Value::undefined(s.params[i].name));
  }
  if (caller) scope->set("caller", *caller);
  std::string out;
  exec(s.body, scope, out);
  return Value::string(std::move(out));
}

}  // namespace ferry::text::jinja
