// ferry::Error — the one exception type of the library.
//
// Every failure a user can cause (bad file, bad flag, impossible budget) is reported as a ferry::Error whose
// message says what went wrong, where (file, tensor, module, flag) and what to do about it. Layers add context
// as the error travels up (io knows the file, nn the module, the CLI the flag) with `with_context`.
// Each Error also has a kind (ErrorKind), set where it is thrown, so callers that must react differently (the Python
// bindings raise FileNotFoundError / MemoryError / ValueError) decide on a fact, not on the message's wording.
// Internal invariants are not checked with Error; they are assertions.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace ferry {

/// What kind of problem an Error reports. Only the kinds a caller would handle differently are told apart; the
/// message says the rest.
enum class ErrorKind {
  /// Everything that is neither of the others: a bad config, argument, flag or device map, an unknown
  /// architecture, a corrupt or truncated file, an I/O error on a file that is there. The default.
  InvalidValue,
  /// A file, folder, checkpoint shard, tensor file or model that is not there (the path does not exist, errno
  /// ENOENT), as opposed to one that is there but cannot be read or parsed (InvalidValue).
  NotFound,
  /// A memory budget too small for the model or the plan (without disk offload), or an allocation that failed.
  OutOfMemory,
};

/// "invalid_value", "not_found" or "out_of_memory": the kind's name in logs, tests and the Python exception's `kind`.
const char* error_kind_name(ErrorKind kind) noexcept;

/// The kind of a failed open(2) from its errno: NotFound for ENOENT / ENOTDIR (the path is not there), else
/// InvalidValue (permissions, a folder where a file was expected, ...). Read errno before anything can change it.
ErrorKind error_kind_from_errno(int err) noexcept;

class Error : public std::runtime_error {
 public:
  /// problem: what went wrong ("shape [4, 3] does not match [3, 4]").
  /// where:   the file, tensor or module concerned ("model.safetensors: lm_head.weight"); may be empty.
  /// hint:    what to do ("Are config.json and the weights from the same model?"); may be empty.
  /// The kind is InvalidValue: most errors are, so only the sites that report a missing path or a lack of memory
  /// name theirs (the overload below).
  explicit Error(std::string problem, std::string where = {}, std::string hint = {});
  explicit Error(ErrorKind kind, std::string problem, std::string where = {}, std::string hint = {});

  ErrorKind kind() const noexcept { return kind_; }

  const std::string& problem() const noexcept { return problem_; }
  const std::string& where() const noexcept { return where_; }
  const std::string& hint() const noexcept { return hint_; }

  /// A copy whose `where` is prefixed by `outer` ("model-00002.safetensors" + "lm_head.weight"); same kind.
  Error with_context(const std::string& outer) const;

 private:
  static std::string compose(const std::string& problem, const std::string& where, const std::string& hint);
  ErrorKind kind_ = ErrorKind::InvalidValue;
  std::string problem_, where_, hint_;
};

/// Names for an error message: the first `shown` joined by ", ", then "... (N in all)" when there are more.
std::string list_for_error(const std::vector<std::string>& names, std::size_t shown = 8);

}  // namespace ferry
