// The Jinja parser's entry point and the helpers every part of it uses: the token cursor's errors (syntax errors
// name the template and line:column, with a hint) and the construction of located syntax-tree nodes. The grammar
// itself is in parser_statements.cc, parser_expressions.cc and parser_postfix.cc (see parser_internal.h).
#include "text/jinja/parser.h"

#include "ferry/core/error.h"
#include "text/jinja/parser_internal.h"

namespace ferry::text::jinja {

Body Parser::parse_template() {
  Body body = subparse({});
  if (cur().type != T::End) error(cur(), "unexpected '" + describe(cur()) + "'");
  return body;
}

std::string Parser::describe(const Token& t) {
  switch (t.type) {
    case T::Data: return "text";
    case T::VarBegin: return "{{";
    case T::VarEnd: return "}}";
    case T::BlockBegin: return "{%";
    case T::BlockEnd: return "%}";
    case T::End: return "end of template";
    case T::String: return "string";
    default: return t.text;
  }
}

void Parser::error(const Token& t, const std::string& problem, const std::string& hint) {
  throw Error(problem, location(name_, t.line, t.column),
              hint.empty() ? "check the template's syntax (Jinja, as jinja2 parses it)" : hint);
}

void Parser::expect_op(const char* op) {
  if (!is_op(op)) error(cur(), std::string("expected '") + op + "', got '" + describe(cur()) + "'");
  advance();
}

void Parser::expect_block_end() {
  if (cur().type != T::BlockEnd) error(cur(), "expected '%}', got '" + describe(cur()) + "'");
  advance();
}

std::string Parser::expect_name() {
  if (cur().type != T::Name) error(cur(), "expected a name, got '" + describe(cur()) + "'");
  return advance().text;
}

ExprPtr Parser::make(Expr::Kind kind, const Token& at) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = at.line;
  e->column = at.column;
  return e;
}

StmtPtr Parser::make_stmt(Stmt::Kind kind, const Token& at) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = at.line;
  s->column = at.column;
  return s;
}

Body parse(const std::vector<Token>& tokens, const std::string& name) { return Parser(tokens, name).parse_template(); }

}  // namespace ferry::text::jinja
