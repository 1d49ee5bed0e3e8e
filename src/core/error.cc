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

}  // namespace ferry
