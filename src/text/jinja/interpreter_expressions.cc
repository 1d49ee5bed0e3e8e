// The Jinja interpreter's expressions: evaluating a syntax-tree expression in a frame (names, literals, operators,
// attribute and item access, calls, filters and tests), with the line:column of the innermost expression kept for
// error messages and the evaluation depth bounded. Statements, scopes and macros are in interpreter.cc.
#include "text/jinja/interpreter.h"

#include "text/jinja/builtins.h"
#include "text/jinja/failure.h"

namespace ferry::text::jinja {

Value Interpreter::call(const Value& fn, CallArgs& args) { return call_value(fn, args); }

Value Interpreter::call_value(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) {
    fail(undefined_message(fn));
  }
  if (!fn.is_callable()) fail("'" + fn.type_name() + "' object is not callable");
  return fn.as_callable().fn(*this, args);
}

Value Interpreter::filter(const std::string& name, const Value& value, CallArgs& args) {
  return apply_filter(*this, name, value, args);
}

bool Interpreter::test(const std::string& name, const Value& value, CallArgs& args) {
  return apply_test(*this, name, value, args);
}

void Interpreter::eval_args(const std::vector<Arg>& args, const std::shared_ptr<Frame>& frame, CallArgs& out) {
  for (const Arg& a : args) {
    Value v = eval(*a.value, frame);
    if (a.name.empty()) out.args.push_back(std::move(v));
    else out.kwargs.emplace_back(a.name, std::move(v));
  }
}

Value Interpreter::eval(const Expr& e, const std::shared_ptr<Frame>& frame) {
  if (++eval_depth_ > 2 * Limits::kMaxNesting + Limits::kMaxCallDepth * 8) {
    --eval_depth_;
    fail("expression evaluation nested too deeply");
  }
  const int line = line_, column = column_;
  line_ = e.line;
  column_ = e.column;
  Value v = eval_inner(e, frame);
  line_ = line;
  column_ = column;
  --eval_depth_;
  return v;
}

Value Interpreter::eval_inner(const Expr& e, const std::shared_ptr<Frame>& frame) {
  switch (e.kind) {
    case Expr::Kind::Literal: return e.literal;
    case Expr::Kind::Name: {
      const Value* v = frame->lookup(e.name);
      return v ? *v : Value::undefined(e.name);
    }
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
      List items;
      for (const ExprPtr& item : e.items) items.push_back(eval(*item, frame));
      return Value::list(std::move(items), e.kind == Expr::Kind::Tuple);
    }
    case Expr::Kind::Dict: {
      DictItems items;
      for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = eval(*e.items[i], frame);
        Value v = eval(*e.items[i + 1], frame);
        if (k.is_list() && !k.is_tuple()) fail("unhashable type: 'list'");
        if (k.is_dict()) fail("unhashable type: 'dict'");
        bool replaced = false;
        for (auto& [old_k, old_v] : items) {
          if (equal(old_k, k)) {
            old_v = v;
            replaced = true;
          }
        }
        if (!replaced) items.emplace_back(std::move(k), std::move(v));
      }
      return Value::dict(std::move(items));
    }
    case Expr::Kind::GetAttr: {
      const Value obj = eval(*e.items[0], frame);
      return get_attr(obj, e.name);
    }
    case Expr::Kind::GetItem: {
      const Value obj = eval(*e.items[0], frame);
      const Value key = eval(*e.items[1], frame);
      return get_item(obj, key);
    }
    case Expr::Kind::Slice: {
      const Value obj = eval(*e.items[0], frame);
      Value parts[3];
      for (int i = 0; i < 3; ++i) {
        parts[i] = e.items[static_cast<std::size_t>(i) + 1] ? eval(*e.items[static_cast<std::size_t>(i) + 1], frame)
                                                            : Value::none();
      }
      return get_slice(obj, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::Call: {
      const Value fn = eval(*e.items[0], frame);
      CallArgs args;
      eval_args(e.args, frame, args);
      return call_value(fn, args);
    }
    case Expr::Kind::Filter: {
      const Value v = e.items[0] ? eval(*e.items[0], frame) : *frame->lookup("\x01block");
      CallArgs args;
      eval_args(e.args, frame, args);
      return apply_filter(*this, e.name, v, args);
    }
    case Expr::Kind::Test: {
      const Value v = eval(*e.items[0], frame);
      CallArgs args;
      eval_args(e.args, frame, args);
      return Value::boolean(apply_test(*this, e.name, v, args) != e.negated);
    }
    case Expr::Kind::Neg:
    case Expr::Kind::Pos: {
      const Value v = eval(*e.items[0], frame);
      if (!v.is_number()) fail("bad operand type for unary " + std::string(e.kind == Expr::Kind::Neg ? "-" : "+") + ": '" + v.type_name() + "'");
      if (e.kind == Expr::Kind::Pos) return v.is_bool() ? Value::integer(v.as_int()) : v;
      if (v.is_float()) return Value::number(-v.as_float());
      if (v.as_int() == INT64_MIN) fail("integer overflow");
      return Value::integer(-v.as_int());
    }
    case Expr::Kind::Not: return Value::boolean(!eval(*e.items[0], frame).truthy());
    case Expr::Kind::And: {
      Value l = eval(*e.items[0], frame);
      return l.truthy() ? eval(*e.items[1], frame) : l;
    }
    case Expr::Kind::Or: {
      Value l = eval(*e.items[0], frame);
      return l.truthy() ? l : eval(*e.items[1], frame);
    }
    case Expr::Kind::Binary: {
      const Value l = eval(*e.items[0], frame);
      const Value r = eval(*e.items[1], frame);
      line_ = e.line;
      column_ = e.column;
      return binary_op(e.name, l, r);
    }
    case Expr::Kind::Concat: {
      std::string s;
      for (const ExprPtr& item : e.items) {
        s += to_str(eval(*item, frame));
        if (s.size() > Limits::kMaxOutput) fail("a string exceeds " + std::to_string(Limits::kMaxOutput) + " bytes");
      }
      return Value::string(std::move(s));
    }
    case Expr::Kind::Compare: {
      Value left = eval(*e.items[0], frame);
      for (std::size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.items[i + 1], frame);
        line_ = e.line;
        column_ = e.column;
        if (!compare(e.ops[i], left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case Expr::Kind::CondExpr: {
      if (eval(*e.items[0], frame).truthy()) return eval(*e.items[1], frame);
      return e.items[2] ? eval(*e.items[2], frame) : Value::undefined();
    }
  }
  return Value::undefined();
}

}  // namespace ferry::text::jinja
