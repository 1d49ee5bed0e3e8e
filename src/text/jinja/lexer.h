// The Jinja lexer: template source to tokens, with jinja2's whitespace rules as transformers configures them
// (trim_blocks, lstrip_blocks, keep_trailing_newline=False, "\r\n" and "\r" read as "\n"), `-` / `+` whitespace
// control on every tag, comments dropped and {% raw %} blocks turned into plain text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ferry::text::jinja {

struct Token {
  enum class Type { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };
  Type type = Type::End;
  std::string text;       // data, name, operator, or a string literal's decoded value
  std::int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int column = 1;
};

/// Tokenizes `source`; syntax errors (unclosed comment, bad string escape, unbalanced brackets, stray characters)
/// throw ferry::Error naming `name` and the line:column.
std::vector<Token> tokenize(const std::string& source, const std::string& name);

/// "chat_template.jinja:3:14" — the location format of every template error.
std::string location(const std::string& name, int line, int column);

}  // namespace ferry::text::jinja
