// ferry::Error — the one exception type of the library.
//
// Every failure a user can cause (bad file, bad flag, impossible budget) is reported as a ferry::Error whose
// message says what went wrong, where (file, tensor, module, flag) and what to do about it. Layers add context
// as the error travels up (io knows the file, nn the module, the CLI the flag) with `with_context`.
// Internal invariants are not checked with Error; they are assertions.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace ferry {

class Error : public std::runtime_error {
 public:
  /// problem: what went wrong ("shape [4, 3] does not match [3, 4]").
  /// where:   the file, tensor or module concerned ("model.safetensors: lm_head.weight"); may be empty.
  /// hint:    what to do ("Are config.json and the weights from the same model?"); may be empty.
  explicit Error(std::string problem, std::string where = {}, std::string hint = {});

  const std::string& problem() const noexcept { return problem_; }
  const std::string& where() const noexcept { return where_; }
  const std::string& hint() const noexcept { return hint_; }

  /// A copy whose `where` is prefixed by `outer` ("model-00002.safetensors" + "lm_head.weight").
  Error with_context(const std::string& outer) const;

 private:
  static std::string compose(const std::string& problem, const std::string& where, const std::string& hint);
  std::string problem_, where_, hint_;
};

/// Names for an error message: the first `shown` joined by ", ", then "... (N in all)" when there are more.
std::string list_for_error(const std::vector<std::string>& names, std::size_t shown = 8);

}  // namespace ferry
