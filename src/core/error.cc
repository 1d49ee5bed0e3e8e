// ferry::Error: message composition ("where: problem. hint").
#include "ferry/core/error.h"

namespace ferry {

Error::Error(std::string problem, std::string where, std::string hint)
    : std::runtime_error(compose(problem, where, hint)),
      problem_(std::move(problem)),
      where_(std::move(where)),
      hint_(std::move(hint)) {}

std::string Error::compose(const std::string& problem, const std::string& where, const std::string& hint) {
  std::string msg;
  if (!where.empty()) msg += where + ": ";
  msg += problem;
  if (!hint.empty()) msg += " (" + hint + ")";
  return msg;
}

Error Error::with_context(const std::string& outer) const {
  if (outer.empty()) return *this;
  return Error(problem_, where_.empty() ? outer : outer + ": " + where_, hint_);
}

std::string list_for_error(const std::vector<std::string>& names, std::size_t shown) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

}  // namespace ferry
