// The Jinja parser (recursive descent in jinja2's precedence order: condexpr, or, and, not, compare, + -, ~,
// * / // %, **, unary, then postfix / filters / tests). Nesting is bounded so no input exhausts the stack.
#include "text/jinja/parser.h"

#include "ferry/core/error.h"
#include "text/jinja/failure.h"

namespace ferry::text::jinja {
namespace {

using T = Token::Type;

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name) : toks_(tokens), name_(name) {}

  Body parse_template() {
    Body body = subparse({});
    if (cur().type != T::End) error(cur(), "unexpected '" + describe(cur()) + "'");
    return body;
  }

 private:
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > Limits::kMaxNesting) p.error(p.cur(), "the template is nested too deeply", "at most 200 levels");
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(std::size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& advance() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == T::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == T::Name && cur().text == n; }

  static std::string describe(const Token& t) {
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

  [[noreturn]] void error(const Token& t, const std::string& problem, const std::string& hint = {}) {
    throw Error(problem, location(name_, t.line, t.column),
                hint.empty() ? "check the template's syntax (Jinja, as jinja2 parses it)" : hint);
  }

  void expect_op(const char* op) {
    if (!is_op(op)) error(cur(), std::string("expected '") + op + "', got '" + describe(cur()) + "'");
    advance();
  }
  void expect_block_end() {
    if (cur().type != T::BlockEnd) error(cur(), "expected '%}', got '" + describe(cur()) + "'");
    advance();
  }
  std::string expect_name() {
    if (cur().type != T::Name) error(cur(), "expected a name, got '" + describe(cur()) + "'");
    return advance().text;
  }

  ExprPtr make(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }
  StmtPtr make_stmt(Stmt::Kind kind, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = at.line;
    s->column = at.column;
    return s;
  }

  // --- statements ---

  // Text, prints and statements until a block whose first name is one of `end_names` (left unconsumed, with the
  // cursor on that name) or the end of the template.
  Body subparse(const std::vector<std::string>& end_names) {
    DepthGuard guard(*this);
    Body body;
    for (;;) {
      const Token& t = cur();
      if (t.type == T::End) return body;
      if (t.type == T::Data) {
        auto s = make_stmt(Stmt::Kind::Text, t);
        s->text = t.text;
        advance();
        body.push_back(std::move(s));
      } else if (t.type == T::VarBegin) {
        auto s = make_stmt(Stmt::Kind::Print, t);
        advance();
        s->expr = parse_tuple(true, {}, false);
        if (cur().type != T::VarEnd) error(cur(), "expected '}}', got '" + describe(cur()) + "'");
        advance();
        body.push_back(std::move(s));
      } else if (t.type == T::BlockBegin) {
        advance();
        if (cur().type == T::Name) {
          for (const std::string& end : end_names) {
            if (cur().text == end) return body;
          }
        }
        body.push_back(parse_statement(t));
      } else {
        error(t, "unexpected '" + describe(t) + "'");
      }
    }
  }

  // After a statement's header: `%}`, the body, and the cursor on one of `end_names` (consumed when `drop`).
  Body parse_statements(const std::vector<std::string>& end_names, bool drop, const Token& opener, const char* what) {
    if (is_op(":")) advance();
    expect_block_end();
    Body body = subparse(end_names);
    if (cur().type == T::End) {
      std::string names;
      for (const std::string& n : end_names) names += (names.empty() ? "" : " or ") + ("{% " + n + " %}");
      error(opener, "unexpected end of template: this '" + std::string(what) + "' block is never closed",
            "close it with " + names);
    }
    if (drop) advance();
    return body;
  }

  StmtPtr parse_statement(const Token& open) {
    if (cur().type != T::Name) error(cur(), "tag name expected, got '" + describe(cur()) + "'");
    const Token& t = cur();
    const std::string tag = t.text;
    if (tag == "if") return parse_if(open);
    if (tag == "for") return parse_for(open);
    if (tag == "set") return parse_set(open);
    if (tag == "macro") return parse_macro(open);
    if (tag == "call") return parse_call_block(open);
    if (tag == "filter") return parse_filter_block(open);
    if (tag == "generation") {
      advance();
      auto s = make_stmt(Stmt::Kind::Generation, open);
      s->body = parse_statements({"endgeneration"}, true, open, "generation");
      expect_block_end();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) error(t, "'" + tag + "' outside of a loop", "break and continue only work inside {% for %}");
      advance();
      expect_block_end();
      return make_stmt(tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, open);
    }
    if (tag == "extends" || tag == "block" || tag == "include" || tag == "import" || tag == "from" || tag == "with" ||
        tag == "autoescape" || tag == "print" || tag == "do" || tag == "raw") {
      error(t, "the '" + tag + "' tag is not supported in chat templates",
            "ferry renders self-contained chat templates (no inheritance, includes or imports)");
    }
    error(t, "encountered unknown tag '" + tag + "'",
          tag.rfind("end", 0) == 0 ? "is a block closed twice, or closed without being opened?"
                                   : "check the tag's spelling");
  }

  StmtPtr parse_if(const Token& open) {
    auto s = make_stmt(Stmt::Kind::If, open);
    const Token* opener = &open;
    advance();  // if
    for (;;) {
      s->conditions.push_back(parse_tuple(false, {}, false));
      s->bodies.push_back(parse_statements({"elif", "else", "endif"}, false, *opener, "if"));
      const std::string which = advance().text;
      if (which == "elif") continue;
      if (which == "else") {
        s->else_body = parse_statements({"endif"}, true, *opener, "if");
      }
      break;
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_for(const Token& open) {
    auto s = make_stmt(Stmt::Kind::For, open);
    advance();  // for
    const bool paren = is_op("(");
    if (paren) advance();
    for (;;) {
      s->targets.push_back(expect_name());
      if (!is_op(",")) break;
      advance();
      if (is_name("in") || is_op(")")) break;
    }
    if (paren) expect_op(")");
    if (!is_name("in")) error(cur(), "expected 'in', got '" + describe(cur()) + "'");
    advance();
    s->expr = parse_tuple(false, {"recursive"}, false);
    if (is_name("if")) {
      advance();
      s->cond = parse_expression(true);
    }
    if (is_name("recursive")) error(cur(), "recursive loops are not supported", "loop over the items explicitly");
    ++loop_depth_;
    s->body = parse_statements({"endfor", "else"}, false, open, "for");
    --loop_depth_;
    if (advance().text == "else") {
      s->else_body = parse_statements({"endfor"}, true, open, "for");
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_set(const Token& open) {
    advance();  // set
    const Token& at = cur();
    std::vector<std::string> targets{expect_name()};
    std::string attr;
    if (is_op(".")) {
      advance();
      attr = expect_name();
    } else {
      while (is_op(",")) {
        advance();
        if (is_op("=")) break;
        targets.push_back(expect_name());
      }
    }
    if (is_op("=")) {
      advance();
      auto s = make_stmt(Stmt::Kind::Set, open);
      s->targets = std::move(targets);
      s->attr = std::move(attr);
      s->expr = parse_tuple(true, {}, false);
      expect_block_end();
      return s;
    }
    if (!attr.empty() || targets.size() != 1) error(at, "a block set assigns one plain name");
    auto s = make_stmt(Stmt::Kind::SetBlock, open);
    s->targets = std::move(targets);
    if (is_op("|")) s->filter = parse_filter_chain(nullptr);
    s->body = parse_statements({"endset"}, true, open, "set");
    expect_block_end();
    return s;
  }

  void parse_signature(std::vector<MacroParam>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (is_op("=")) {
        advance();
        p.default_value = parse_expression(true);
      }
      params.push_back(std::move(p));
    }
    advance();
  }

  StmtPtr parse_macro(const Token& open) {
    advance();  // macro
    auto s = make_stmt(Stmt::Kind::Macro, open);
    s->name = expect_name();
    parse_signature(s->params);
    const std::size_t saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_statements({"endmacro"}, true, open, "macro");
    loop_depth_ = saved;
    if (cur().type == T::Name) advance();  // {% endmacro name %}
    expect_block_end();
    return s;
  }

  StmtPtr parse_call_block(const Token& open) {
    advance();  // call
    auto s = make_stmt(Stmt::Kind::CallBlock, open);
    if (is_op("(")) parse_signature(s->params);
    s->expr = parse_expression(true);
    if (s->expr->kind != Expr::Kind::Call) error(open, "expected a call after {% call %}");
    const std::size_t saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_statements({"endcall"}, true, open, "call");
    loop_depth_ = saved;
    expect_block_end();
    return s;
  }

  StmtPtr parse_filter_block(const Token& open) {
    advance();  // filter
    auto s = make_stmt(Stmt::Kind::FilterBlock, open);
    s->filter = parse_filter_chain(nullptr, true);
    s->body = parse_statements({"endfilter"}, true, open, "filter");
    expect_block_end();
    return s;
  }

  // --- expressions ---

  bool is_tuple_end(const std::vector<std::string>& extra) const {
    if (cur().type == T::VarEnd || cur().type == T::BlockEnd || cur().type == T::End) return true;
    if (is_op(")")) return true;
    if (cur().type == T::Name) {
      for (const std::string& e : extra) {
        if (cur().text == e) return true;
      }
    }
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, const std::vector<std::string>& extra, bool explicit_parens) {
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

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
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

  ExprPtr binary(Expr::Kind kind, const Token& at, ExprPtr l, ExprPtr r, std::string op = {}) {
    auto e = make(kind, at);
    e->name = std::move(op);
    e->items.push_back(std::move(l));
    e->items.push_back(std::move(r));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const Token& at = advance();
      left = binary(Expr::Kind::Or, at, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const Token& at = advance();
      left = binary(Expr::Kind::And, at, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      const Token& at = advance();
      auto e = make(Expr::Kind::Not, at);
      e->items.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& at = advance();
      left = binary(Expr::Kind::Binary, at, std::move(left), parse_concat(), at.text);
    }
    return left;
  }

  ExprPtr parse_concat() {
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

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& at = advance();
      left = binary(Expr::Kind::Binary, at, std::move(left), parse_pow(), at.text);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const Token& at = advance();
      left = binary(Expr::Kind::Binary, at, std::move(left), parse_unary(true), "**");
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr parse_primary() {
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

  ExprPtr parse_postfix(ExprPtr node) {
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

  ExprPtr parse_filter_expr(ExprPtr node) {
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

  ExprPtr parse_subscript(ExprPtr node) {
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

  void parse_call_args(std::vector<Arg>& args) {
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

  ExprPtr parse_call(ExprPtr node) {
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
  ExprPtr parse_filter_chain(ExprPtr node, bool inline_start = false) {
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

  ExprPtr parse_test(ExprPtr node) {
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

  const std::vector<Token>& toks_;
  const std::string& name_;
  std::size_t pos_ = 0;
  std::size_t depth_ = 0;
  std::size_t loop_depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens, const std::string& name) { return Parser(tokens, name).parse_template(); }

}  // namespace ferry::text::jinja
