// The syntax tree of a parsed Jinja template: expressions (Expr) and statements (Stmt), each with the line:column
// it came from for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace ferry::text::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

/// A call argument: positional when `name` is empty, else keyword.
struct Arg {
  std::string name;
  ExprPtr value;
};

struct Expr {
  enum class Kind {
    Literal,    // literal
    Name,       // name
    List,       // items
    Tuple,      // items
    Dict,       // items: key, value, key, value, ...
    GetAttr,    // items[0].name
    GetItem,    // items[0][items[1]]
    Slice,      // items[0][items[1]:items[2]:items[3]] (null parts absent)
    Call,       // items[0](args)
    Filter,     // items[0] | name(args); items[0] null inside {% filter %}
    Test,       // items[0] is [not] name(args); negated
    Neg,        // -items[0]
    Pos,        // +items[0]
    Not,        // not items[0]
    And,        // items[0] and items[1]
    Or,         // items[0] or items[1]
    Binary,     // items[0] name items[1]  (+ - * / // % ** )
    Concat,     // items joined with ~
    Compare,    // items[0] ops[0] items[1] ops[1] items[2] ...
    CondExpr,   // items[1] if items[0] else items[2] (items[2] may be null)
  };
  Kind kind = Kind::Literal;
  int line = 0;
  int column = 0;
  Value literal;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> items;
  std::vector<Arg> args;
  std::vector<std::string> ops;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  enum class Kind {
    Text,         // text
    Print,        // {{ expr }}
    If,           // conditions[i] -> bodies[i]; else_body
    For,          // for targets in expr [if cond]: body, else_body
    Set,          // set targets = expr;  or set target.attr = expr (attr non-empty)
    SetBlock,     // {% set targets[0] %}body{% endset %}, through filter (may be null)
    Macro,        // macro name(params): body
    CallBlock,    // {% call(params) expr %}body{% endcall %}
    FilterBlock,  // {% filter filter %}body{% endfilter %}
    Break,
    Continue,
    Generation,   // {% generation %}body{% endgeneration %}: renders its body
  };
  Kind kind = Kind::Text;
  int line = 0;
  int column = 0;
  std::string text;
  std::string name;
  std::string attr;
  std::vector<std::string> targets;
  ExprPtr expr;
  ExprPtr cond;
  ExprPtr filter;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body body;
  Body else_body;
  std::vector<MacroParam> params;
};

}  // namespace ferry::text::jinja
