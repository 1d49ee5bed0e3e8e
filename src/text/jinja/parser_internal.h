// The Jinja parser's class, shared by the files that implement it: parser.cc (the token cursor, syntax errors and
// node construction), parser_statements.cc (text, prints and {% %} tags), parser_expressions.cc (operators by
// precedence and literals) and parser_postfix.cc (attributes, subscripts, calls, filters and tests). Only those
// files include it; the rest of the engine uses parser.h.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/failure.h"
#include "text/jinja/lexer.h"

namespace ferry::text::jinja {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name) : toks_(tokens), name_(name) {}

  Body parse_template();

 private:
  using T = Token::Type;

  // Counts nested blocks and expressions, so no input can exhaust the stack of this recursive descent.
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > Limits::kMaxNesting) p.error(p.cur(), "the template is nested too deeply", "at most 200 levels");
    }
    ~DepthGuard() { --p.depth_; }
  };

  // --- the token cursor, errors and node construction (parser.cc) ---

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(std::size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& advance() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == T::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == T::Name && cur().text == n; }

  static std::string describe(const Token& t);
  [[noreturn]] void error(const Token& t, const std::string& problem, const std::string& hint = {});
  void expect_op(const char* op);
  void expect_block_end();
  std::string expect_name();
  ExprPtr make(Expr::Kind kind, const Token& at);
  StmtPtr make_stmt(Stmt::Kind kind, const Token& at);

  // --- statements (parser_statements.cc) ---

  Body subparse(const std::vector<std::string>& end_names);
  Body parse_statements(const std::vector<std::string>& end_names, bool drop, const Token& opener, const char* what);
  StmtPtr parse_statement(const Token& open);
  StmtPtr parse_if(const Token& open);
  StmtPtr parse_for(const Token& open);
  StmtPtr parse_set(const Token& open);
  void parse_signature(std::vector<MacroParam>& params);
  StmtPtr parse_macro(const Token& open);
  StmtPtr parse_call_block(const Token& open);
  StmtPtr parse_filter_block(const Token& open);

  // --- expressions, from the loosest-binding operator down to literals (parser_expressions.cc) ---

  bool is_tuple_end(const std::vector<std::string>& extra) const;
  ExprPtr parse_tuple(bool with_condexpr, const std::vector<std::string>& extra, bool explicit_parens);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr binary(Expr::Kind kind, const Token& at, ExprPtr l, ExprPtr r, std::string op = {});
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();

  // --- what follows an operand: . [ ] ( ) | is (parser_postfix.cc) ---

  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  void parse_call_args(std::vector<Arg>& args);
  ExprPtr parse_call(ExprPtr node);
  ExprPtr parse_filter_chain(ExprPtr node, bool inline_start = false);
  ExprPtr parse_test(ExprPtr node);

  const std::vector<Token>& toks_;
  const std::string& name_;
  std::size_t pos_ = 0;
  std::size_t depth_ = 0;
  std::size_t loop_depth_ = 0;
};

}  // namespace ferry::text::jinja
