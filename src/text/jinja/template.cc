// Template: the lexer and parser at construction, a fresh interpreter per render.
#include "text/jinja/template.h"

#include "text/jinja/builtins.h"
#include "text/jinja/lexer.h"
#include "text/jinja/parser.h"

namespace ferry::text::jinja {

Template::Template(const std::string& source, std::string name) : name_(std::move(name)) {
  body_ = parse(tokenize(source, name_), name_);
}

std::string Template::render(const std::vector<std::pair<std::string, Value>>& variables,
                             const RenderSettings& settings) const {
  auto builtins = std::make_shared<Frame>();
  builtins->vars = global_functions();
  auto globals = std::make_shared<Frame>();
  globals->parent = builtins;
  for (const auto& [k, v] : variables) globals->set(k, v);
  Interpreter interpreter(body_, name_, settings);
  return interpreter.render(globals);
}

}  // namespace ferry::text::jinja
