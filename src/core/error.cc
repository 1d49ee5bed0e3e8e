// ferry::Error: message composition ("where: problem (hint)") and kinds.
#include "ferry/core/error.h"

#include <cerrno>

namespace ferry {

Error::Error(std::string problem, std::string where, std::string hint)
    : Error(ErrorKind::InvalidValue, std::move(problem), std::move(where), std::move(hint)) {}

Error::Error(ErrorKind kind, std::string problem, std::string where, std::string hint)
    : std::runtime_error(compose(problem, where, hint)),
      kind_(kind),
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
  return Error(kind_, problem_, where_.empty() ? outer : outer + ": " + where_, hint_);
}

const char* error_kind_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::NotFound: return "not_found";
    case ErrorKind::OutOfMemory: return "out_of_memory";
    case ErrorKind::InvalidValue: break;
  }
  return "invalid_value";
}

ErrorKind error_kind_from_errno(int err) noexcept {
  return err == ENOENT || err == ENOTDIR ? ErrorKind::NotFound : ErrorKind::InvalidValue;
}

std::string list_for_error(const std::vector<std::string>& names, std::size_t shown) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

}  // namespace ferry
