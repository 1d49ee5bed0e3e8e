// The Jinja parser: tokens to a syntax tree, following jinja2's grammar and operator precedence (parser.py) for
// the statements chat templates use: if/elif/else, for (tuple targets, inline if filter, else), set (names,
// namespace attributes, block form), macro, call blocks, filter blocks, break/continue (jinja2.ext.loopcontrols),
// generation/endgeneration (transformers' AssistantTracker). extends/block/include/import/with are refused.
#pragma once

#include <string>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace ferry::text::jinja {

/// Parses a whole template; syntax errors throw ferry::Error with `name`:line:column and a hint.
Body parse(const std::vector<Token>& tokens, const std::string& name);

}  // namespace ferry::text::jinja
