// ferry::Error as Python exceptions. The classes live in ferry/_errors.py; every one derives from ferry.Error and
// from the built-in exception that says what kind of problem it is:
//   NotFoundError     (FileNotFoundError): a file or folder that is not there
//   OutOfMemoryError  (MemoryError):       a budget too small for the model, or an allocation that failed
//   InvalidValueError (ValueError):        everything else (bad config, bad argument, corrupt file, ...)
// ferry::Error carries no category, so the kind is read from how the library words its problems (see classify).
#include <nanobind/stl/string.h>

#include <filesystem>
#include <string_view>

#include "bindings.h"
#include "ferry/core/error.h"

namespace ferry::python {
namespace {

enum class Kind { NotFound, OutOfMemory, InvalidValue };

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// The library's wording: "checkpoint not found", "index names 1 shard file(s) that do not exist", "cannot open
// config.json" / "cannot open the file" (where = the path), "cannot open file: No such file or directory"; budgets:
// "the model does not fit without disk offload", "... needs N on cpu but its budget is M", "out of (host) memory".
Kind classify(const Error& e) {
  const std::string_view p = e.problem();
  if (contains(p, "not found") || contains(p, "No such file") || contains(p, "does not exist") ||
      contains(p, "do not exist"))
    return Kind::NotFound;
  if (p.rfind("cannot open", 0) == 0) {
    std::error_code ec;
    if (!e.where().empty() && !std::filesystem::exists(e.where(), ec)) return Kind::NotFound;
  }
  if (contains(p, "out of memory") || contains(p, "out of host memory") || contains(p, "does not fit") ||
      contains(p, "but its budget is"))
    return Kind::OutOfMemory;
  return Kind::InvalidValue;
}

// The classes of ferry._errors, looked up once (kept for the life of the process).
struct Classes {
  nb::handle not_found, out_of_memory, invalid_value;
};
Classes& classes() {
  static Classes c;
  return c;
}

void raise(const Error& e) {
  const Classes& c = classes();
  const Kind kind = classify(e);
  nb::handle cls = kind == Kind::NotFound ? c.not_found : kind == Kind::OutOfMemory ? c.out_of_memory : c.invalid_value;
  nb::object exc = cls(nb::str(e.what()));
  exc.attr("problem") = nb::str(e.problem().c_str());
  exc.attr("where") = nb::str(e.where().c_str());
  exc.attr("hint") = nb::str(e.hint().c_str());
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

}  // namespace

void bind_errors(nb::module_& m) {
  nb::module_ errors = nb::module_::import_("ferry._errors");
  Classes& c = classes();
  c.not_found = nb::object(errors.attr("NotFoundError")).release();
  c.out_of_memory = nb::object(errors.attr("OutOfMemoryError")).release();
  c.invalid_value = nb::object(errors.attr("InvalidValueError")).release();
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      raise(e);
    }
  });
  m.def("_classify_for_test", [](const std::string& problem, const std::string& where) {
    const Kind k = classify(Error(problem, where));
    return k == Kind::NotFound ? "not_found" : k == Kind::OutOfMemory ? "out_of_memory" : "invalid_value";
  }, "The exception kind a ferry::Error with this problem and where becomes (tests only).");
}

}  // namespace ferry::python
