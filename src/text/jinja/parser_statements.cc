// The Jinja parser's statements: template text, {{ prints }} and the {% %} tags chat templates use (if, for, set,
// macro, call, filter, generation, break/continue), each read up to its end tag. Tags that need other templates
// (extends, include, import, ...) are refused with a message saying so.
#include "text/jinja/parser_internal.h"

namespace ferry::text::jinja {

// Text, prints and statements until a block whose first name is one of `end_names` (left unconsumed, with the
// cursor on that name) or the end of the template.
Body Parser::subparse(const std::vector<std::string>& end_names) {
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
Body Parser::parse_statements(const std::vector<std::string>& end_names, bool drop, const Token& opener,
                              const char* what) {
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

StmtPtr Parser::parse_statement(const Token& open) {
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

StmtPtr Parser::parse_if(const Token& open) {
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

StmtPtr Parser::parse_for(const Token& open) {
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

StmtPtr Parser::parse_set(const Token& open) {
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

void Parser::parse_signature(std::vector<MacroParam>& params) {
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

StmtPtr Parser::parse_macro(const Token& open) {
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

StmtPtr Parser::parse_call_block(const Token& open) {
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

StmtPtr Parser::parse_filter_block(const Token& open) {
  advance();  // filter
  auto s = make_stmt(Stmt::Kind::FilterBlock, open);
  s->filter = parse_filter_chain(nullptr, true);
  s->body = parse_statements({"endfilter"}, true, open, "filter");
  expect_block_end();
  return s;
}

}  // namespace ferry::text::jinja
