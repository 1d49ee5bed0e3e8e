// The Jinja parser's postfix forms, what may follow an operand: `.name`, `[index]` and slices and calls with keyword
// arguments (binding tightest), then `| filter(args)` chains and `is [not] test` checks, which parse_unary applies
// outside a unary sign as jinja2 does (`-x|abs` is `(-x)|abs`).
#include "text/jinja/parser_internal.h"

namespace ferry::text::jinja {

ExprPtr Parser::parse_postfix(ExprPtr node) {
  for (;;) {
    if (is_op(".") || is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  for (;;) {
    if (is_op("|")) {
      node = parse_filter_chain(std::move(node));
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  DepthGuard guard(*this);
  const Token& t = advance();
  if (t.text == ".") {
    const Token& attr = cur();
    if (attr.type == T::Name) {
      advance();
      auto e = make(Expr::Kind::GetAttr, t);
      e->name = attr.text;
      e->items.push_back(std::move(node));
      return e;
    }
    if (attr.type == T::Int) {
      advance();
      auto e = make(Expr::Kind::GetItem, t);
      auto idx = make(Expr::Kind::Literal, attr);
      idx->literal = Value::integer(attr.int_value);
      e->items.push_back(std::move(node));
      e->items.push_back(std::move(idx));
      return e;
    }
    error(attr, "expected a name or number after '.'");
  }
  // '[' subscript: one index, a slice, or several (a tuple).
  std::vector<ExprPtr> parts;
  bool slice = false;
  ExprPtr start, stop, step;
  for (;;) {
    if (!parts.empty() || slice) expect_op(",");
    if (is_op("]")) break;
    ExprPtr first;
    if (!is_op(":")) first = parse_expression(true);
    if (is_op(":")) {
      if (!parts.empty() || slice) error(cur(), "multi-dimensional slices are not supported");
      slice = true;
      start = std::move(first);
      advance();
      if (!is_op("]") && !is_op(",") && !is_op(":")) stop = parse_expression(true);
      if (is_op(":")) {
        advance();
        if (!is_op("]") && !is_op(",")) step = parse_expression(true);
      }
    } else {
      parts.push_back(std::move(first));
    }
    if (!is_op(",")) break;
  }
  expect_op("]");
  if (slice) {
    if (!parts.empty()) error(t, "multi-dimensional slices are not supported");
    auto e = make(Expr::Kind::Slice, t);
    e->items.push_back(std::move(node));
    e->items.push_back(std::move(start));
    e->items.push_back(std::move(stop));
    e->items.push_back(std::move(step));
    return e;
  }
  if (parts.empty()) error(t, "expected a subscript expression");
  auto e = make(Expr::Kind::GetItem, t);
  e->items.push_back(std::move(node));
  if (parts.size() == 1) {
    e->items.push_back(std::move(parts[0]));
  } else {
    auto tup = make(Expr::Kind::Tuple, t);
    tup->items = std::move(parts);
    e->items.push_back(std::move(tup));
  }
  return e;
}

void Parser::parse_call_args(std::vector<Arg>& args) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (is_op(")")) break;
    if (is_op("*") || is_op("**")) error(cur(), "*args and **kwargs in calls are not supported");
    Arg a;
    if (cur().type == T::Name && peek().type == T::Op && peek().text == "=") {
      a.name = advance().text;
      advance();
    } else {
      for (const Arg& prev : args) {
        if (!prev.name.empty()) error(cur(), "a positional argument follows a keyword argument");
      }
    }
    a.value = parse_expression(true);
    args.push_back(std::move(a));
  }
  advance();
}

ExprPtr Parser::parse_call(ExprPtr node) {
  DepthGuard guard(*this);
  auto e = make(Expr::Kind::Call, cur());
  e->line = node->line;  // errors of a call point at what is called
  e->column = node->column;
  parse_call_args(e->args);
  e->items.push_back(std::move(node));
  return e;
}

// One or more `| name(args)`; `node` may be null (filter blocks, block set), `inline_start` when the first
// filter has no leading pipe.
ExprPtr Parser::parse_filter_chain(ExprPtr node, bool inline_start) {
  DepthGuard guard(*this);
  bool first = true;
  while (is_op("|") || (first && inline_start)) {
    if (!(first && inline_start)) advance();
    first = false;
    const Token& at = cur();
    std::string name = expect_name();
    while (is_op(".")) {
      advance();
      name += "." + expect_name();
    }
    auto e = make(Expr::Kind::Filter, at);
    e->name = std::move(name);
    if (is_op("(")) parse_call_args(e->args);
    e->items.push_back(std::move(node));
    node = std::move(e);
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  DepthGuard guard(*this);
  const Token& at = advance();  // is
  bool negated = false;
  if (is_name("not")) {
    advance();
    negated = true;
  }
  auto e = make(Expr::Kind::Test, at);
  e->name = expect_name();
  e->negated = negated;
  if (is_op("(")) {
    parse_call_args(e->args);
  } else if ((cur().type == T::Name || cur().type == T::String || cur().type == T::Int || cur().type == T::Float ||
              is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) error(cur(), "you cannot chain multiple tests with is");
    Arg a;
    a.value = parse_postfix(parse_primary());
    e->args.push_back(std::move(a));
  }
  e->items.push_back(std::move(node));
  return e;
}

}  // namespace ferry::text::jinja
