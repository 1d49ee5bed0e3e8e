// The Jinja parser's expressions, by recursive descent in jinja2's precedence order: tuples, condexpr, or, and,
// not, compare, + -, ~, * / // %, **, unary, then literals and names (parse_primary). What may follow an operand
// (attributes, subscripts, calls, filters, tests) is in parser_postfix.cc.
#include "text/jinja/parser_internal.h"

namespace ferry::text::jinja {

bool Parser::is_tuple_end(const std::vector<std::string>& extra) const {
  if (cur().type == T::VarEnd || cur().type == T::BlockEnd || cur().type == T::End) return true;
  if (is_op(")")) return true;
  if (cur().type == T::Name) {
    for (const std::string& e : extra) {
      if (cur().text == e) return true;
    }
  }
  return false;
}

ExprPtr Parser::parse_tuple(bool with_condexpr, const std::vector<std::string>& extra, bool explicit_parens) {
  const Token& at = cur();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  for (;;) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra)) break;
    items.push_back(parse_expression(with_condexpr));
    if (is_op(",")) is_tuple = true;
    else break;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) error(cur(), "expected an expression, got '" + describe(cur()) + "'");
  }
  auto e = make(Expr::Kind::Tuple, at);
  e->items = std::move(items);
  return e;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  ExprPtr expr1 = parse_or();
  while (is_name("if")) {
    const Token& at = advance();
    auto e = make(Expr::Kind::CondExpr, at);
    e->items.push_back(parse_or());
    e->items.push_back(std::move(expr1));
    if (is_name("else")) {
      advance();
      e->items.push_back(parse_condexpr());
    } else {
      e->items.push_back(nullptr);
    }
    expr1 = std::move(e);
  }
  return expr1;
}

ExprPtr Parser::binary(Expr::Kind kind, const Token& at, ExprPtr l, ExprPtr r, std::string op) {
  auto e = make(kind, at);
  e->name = std::move(op);
  e->items.push_back(std::move(l));
  e->items.push_back(std::move(r));
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    const Token& at = advance();
    left = binary(Expr::Kind::Or, at, std::move(left), parse_and());
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    const Token& at = advance();
    left = binary(Expr::Kind::And, at, std::move(left), parse_not());
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(*this);
    const Token& at = advance();
    auto e = make(Expr::Kind::Not, at);
    e->items.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const Token& at = cur();
  ExprPtr first = parse_math1();
  std::vector<std::string> ops;
  std::vector<ExprPtr> operands;
  operands.push_back(std::move(first));
  for (;;) {
    if (cur().type == T::Op &&
        (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" || cur().text == ">" ||
         cur().text == ">=")) {
      ops.push_back(advance().text);
    } else if (is_name("in")) {
      advance();
      ops.push_back("in");
    } else if (is_name("not") && peek().type == T::Name && peek().text == "in") {
      advance();
      advance();
      ops.push_back("notin");
    } else {
      break;
    }
    operands.push_back(parse_math1());
  }
  if (ops.empty()) return std::move(operands[0]);
  auto e = make(Expr::Kind::Compare, at);
  e->items = std::move(operands);
  e->ops = std::move(ops);
  return e;
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token& at = advance();
    left = binary(Expr::Kind::Binary, at, std::move(left), parse_concat(), at.text);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const Token& at = cur();
  ExprPtr first = parse_math2();
  if (!is_op("~")) return first;
  auto e = make(Expr::Kind::Concat, at);
  e->items.push_back(std::move(first));
  while (is_op("~")) {
    advance();
    e->items.push_back(parse_math2());
  }
  return e;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& at = advance();
    left = binary(Expr::Kind::Binary, at, std::move(left), parse_pow(), at.text);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const Token& at = advance();
    left = binary(Expr::Kind::Binary, at, std::move(left), parse_unary(true), "**");
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    const Token& at = advance();
    node = make(at.text == "-" ? Expr::Kind::Neg : Expr::Kind::Pos, at);
    node->items.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  switch (t.type) {
    case T::Name: {
      advance();
      if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
        auto e = make(Expr::Kind::Literal, t);
        e->literal = Value::boolean(t.text == "true" || t.text == "True");
        return e;
      }
      if (t.text == "none" || t.text == "None") {
        auto e = make(Expr::Kind::Literal, t);
        e->literal = Value::none();
        return e;
      }
      auto e = make(Expr::Kind::Name, t);
      e->name = t.text;
      return e;
    }
    case T::String: {
      std::string s;
      while (cur().type == T::String) s += advance().text;
      auto e = make(Expr::Kind::Literal, t);
      e->literal = Value::string(std::move(s));
      return e;
    }
    case T::Int: {
      advance();
      auto e = make(Expr::Kind::Literal, t);
      e->literal = Value::integer(t.int_value);
      return e;
    }
    case T::Float: {
      advance();
      auto e = make(Expr::Kind::Literal, t);
      e->literal = Value::number(t.float_value);
      return e;
    }
    case T::Op:
      if (t.text == "(") {
        advance();
        ExprPtr e = parse_tuple(true, {}, true);
        expect_op(")");
        return e;
      }
      if (t.text == "[") {
        advance();
        auto e = make(Expr::Kind::List, t);
        while (!is_op("]")) {
          if (!e->items.empty()) expect_op(",");
          if (is_op("]")) break;
          e->items.push_back(parse_expression(true));
        }
        advance();
        return e;
      }
      if (t.text == "{") {
        advance();
        auto e = make(Expr::Kind::Dict, t);
        while (!is_op("}")) {
          if (!e->items.empty()) expect_op(",");
          if (is_op("}")) break;
          e->items.push_back(parse_expression(true));
          expect_op(":");
          e->items.push_back(parse_expression(true));
        }
        advance();
        return e;
      }
      break;
    default: break;
  }
  error(t, "unexpected '" + describe(t) + "'", "an expression was expected here");
}

}  // namespace ferry::text::jinja
