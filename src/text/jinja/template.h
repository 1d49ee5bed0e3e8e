// A parsed Jinja template: parse once, render many times with different variables.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/value.h"

namespace ferry::text::jinja {

class Template {
 public:
  /// Parses `source`; `name` appears in every error location. Syntax errors throw ferry::Error.
  Template(const std::string& source, std::string name);

  /// Renders with `variables` (plus the globals range, dict, namespace, raise_exception, strftime_now).
  std::string render(const std::vector<std::pair<std::string, Value>>& variables, const RenderSettings& settings = {}) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  Body body_;
};

}  // namespace ferry::text::jinja
