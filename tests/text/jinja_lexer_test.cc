// The Jinja lexer and parser directly: token kinds, values and positions, literal decoding, whitespace control
// at the token level, and the syntax tree's shape for precedence (rendering is covered by jinja_render_test.cc).
#include <gtest/gtest.h>

#include "ferry/core/error.h"
#include "text/jinja/lexer.h"
#include "text/jinja/parser.h"

namespace ferry::text::jinja {
namespace {

using T = Token::Type;

std::string kinds(const std::vector<Token>& tokens) {
  std::string out;
  for (const Token& t : tokens) {
    switch (t.type) {
      case T::Data: out += "D(" + t.text + ")"; break;
      case T::VarBegin: out += "{{"; break;
      case T::VarEnd: out += "}}"; break;
      case T::BlockBegin: out += "{%"; break;
      case T::BlockEnd: out += "%}"; break;
      case T::Name: out += "N(" + t.text + ")"; break;
      case T::String: out += "S(" + t.text + ")"; break;
      case T::Int: out += "I(" + std::to_string(t.int_value) + ")"; break;
      case T::Float: out += "F(" + t.text + ")"; break;
      case T::Op: out += "O(" + t.text + ")"; break;
      case T::End: out += "$"; break;
    }
    out += ' ';
  }
  return out;
}

TEST(JinjaLexer, TokenKindsAndValues) {
  EXPECT_EQ(kinds(tokenize("a{{ x.y|f(1, 'q', 2.5) }}b", "t")),
            "D(a) {{ N(x) O(.) N(y) O(|) N(f) O(() I(1) O(,) S(q) O(,) F(2.5) O()) }} D(b) $ ");
  EXPECT_EQ(kinds(tokenize("{% if a // 2 ** 3 != -1 %}", "t")),
            "{% N(if) N(a) O(//) I(2) O(**) I(3) O(!=) O(-) I(1) %} $ ");
  EXPECT_EQ(kinds(tokenize("{{ {'a': [1]} }}", "t")), "{{ O({) S(a) O(:) O([) I(1) O(]) O(}) }} $ ");
  EXPECT_EQ(kinds(tokenize("{{ 0x10 0b11 0o7 1_000 1e3 }}", "t")), "{{ I(16) I(3) I(7) I(1000) F(1e3) }} $ ");
}

TEST(JinjaLexer, StringEscapes) {
  const auto tokens = tokenize(R"({{ 'a\n\t\\\'\x41\u00e9\U0001F600\d' "\"" }})", "t");
  ASSERT_EQ(tokens[1].type, T::String);
  EXPECT_EQ(tokens[1].text, "a\n\t\\'A\xC3\xA9\xF0\x9F\x98\x80\\d");
  EXPECT_EQ(tokens[2].text, "\"");
}

TEST(JinjaLexer, WhitespaceControlAtTheTokenLevel) {
  EXPECT_EQ(kinds(tokenize("x  \n  {%- if a -%}  \n  y", "t")), "D(x) {% N(if) N(a) %} D(y) $ ");
  // lstrip_blocks removes the indentation before a block tag, trim_blocks the newline after it.
  EXPECT_EQ(kinds(tokenize("x\n    {% if a %}\ny", "t")), "D(x\n) {% N(if) N(a) %} D(y) $ ");
  // Not before a {{ }} tag.
  EXPECT_EQ(kinds(tokenize("x\n    {{ a }}\ny", "t")), "D(x\n    ) {{ N(a) }} D(\ny) $ ");
  // Comments disappear, with the same whitespace rules.
  EXPECT_EQ(kinds(tokenize("a\n  {# note #}\nb", "t")), "D(a\n) D(b) $ ");
}

TEST(JinjaLexer, PositionsAreLineAndColumn) {
  const auto tokens = tokenize("ab\n  {{ x }}", "t");
  ASSERT_GE(tokens.size(), 3u);
  EXPECT_EQ(tokens[1].line, 2);
  EXPECT_EQ(tokens[1].column, 3);
  EXPECT_EQ(tokens[2].column, 6);
  try {
    tokenize("ok\n\n  {{ 'open", "name.jinja");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "name.jinja:3:6");
  }
}

TEST(JinjaParser, PrecedenceFollowsJinja2) {
  const Body body = parse(tokenize("{{ a or b and not c == d + e * f ** g | h }}", "t"), "t");
  ASSERT_EQ(body.size(), 1u);
  const Expr& e = *body[0]->expr;
  ASSERT_EQ(e.kind, Expr::Kind::Or);
  const Expr& and_ = *e.items[1];
  ASSERT_EQ(and_.kind, Expr::Kind::And);
  const Expr& not_ = *and_.items[1];
  ASSERT_EQ(not_.kind, Expr::Kind::Not);
  const Expr& cmp = *not_.items[0];
  ASSERT_EQ(cmp.kind, Expr::Kind::Compare);
  const Expr& plus = *cmp.items[1];
  ASSERT_EQ(plus.kind, Expr::Kind::Binary);
  EXPECT_EQ(plus.name, "+");
  const Expr& times = *plus.items[1];
  EXPECT_EQ(times.name, "*");
  const Expr& pow = *times.items[1];
  EXPECT_EQ(pow.name, "**");
  EXPECT_EQ(pow.items[1]->kind, Expr::Kind::Filter);  // the filter binds to g only
}

TEST(JinjaParser, StatementsNest) {
  const Body body = parse(
      tokenize("{% for k, v in d.items() if v %}{% if loop.first %}{% set ns.x = k %}{% endif %}{% else %}-{% endfor %}",
               "t"),
      "t");
  ASSERT_EQ(body.size(), 1u);
  const Stmt& f = *body[0];
  EXPECT_EQ(f.kind, Stmt::Kind::For);
  EXPECT_EQ(f.targets, (std::vector<std::string>{"k", "v"}));
  ASSERT_TRUE(f.cond);
  ASSERT_EQ(f.body.size(), 1u);
  EXPECT_EQ(f.body[0]->kind, Stmt::Kind::If);
  EXPECT_EQ(f.body[0]->bodies[0][0]->attr, "x");
  EXPECT_EQ(f.else_body.size(), 1u);
}

}  // namespace
}  // namespace ferry::text::jinja
