// ferry::Error as Python exceptions. The classes live in ferry/_errors.py; every one derives from ferry.Error and
// from the built-in exception of its kind. The class follows Error::kind(), which the library sets where it throws,
// never the wording of the message (a reworded message must not change what `except FileNotFoundError` catches):
//   NotFound     -> NotFoundError     (FileNotFoundError): a file or folder that is not there
//   OutOfMemory  -> OutOfMemoryError  (MemoryError):       a budget too small for the model, or a failed allocation
//   InvalidValue -> InvalidValueError (ValueError):        everything else (bad config, bad argument, corrupt file)
// The exception carries the kind's name as `kind` ("not_found", ...) next to `problem`, `where` and `hint`.
#include <nanobind/stl/string.h>

#include <string_view>

#include "bindings.h"
#include "ferry/core/error.h"

namespace ferry::python {
namespace {

// The classes of ferry._errors, looked up once (kept for the life of the process).
struct Classes {
  nb::handle not_found, out_of_memory, invalid_value;
};
Classes& classes() {
  static Classes c;
  return c;
}

nb::handle class_of(ErrorKind kind) {
  const Classes& c = classes();
  switch (kind) {
    case ErrorKind::NotFound: return c.not_found;
    case ErrorKind::OutOfMemory: return c.out_of_memory;
    case ErrorKind::InvalidValue: break;
  }
  return c.invalid_value;
}

void raise(const Error& e) {
  nb::handle cls = class_of(e.kind());
  nb::object exc = cls(nb::str(e.what()));
  exc.attr("kind") = nb::str(error_kind_name(e.kind()));
  exc.attr("problem") = nb::str(e.problem().c_str());
  exc.attr("where") = nb::str(e.where().c_str());
  exc.attr("hint") = nb::str(e.hint().c_str());
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

ErrorKind kind_from_name(std::string_view name) {
  for (ErrorKind k : {ErrorKind::InvalidValue, ErrorKind::NotFound, ErrorKind::OutOfMemory})
    if (name == error_kind_name(k)) return k;
  throw Error("unknown error kind \"" + std::string(name) + "\"", "kind",
              "use \"invalid_value\", \"not_found\" or \"out_of_memory\"");
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
  m.def(
      "_raise_for_test",
      [](const std::string& kind, const std::string& problem, const std::string& where, const std::string& hint) {
        throw Error(kind_from_name(kind), problem, where, hint);
      },
      nb::arg("kind"), nb::arg("problem"), nb::arg("where") = "", nb::arg("hint") = "",
      "Throws a ferry::Error of this kind (\"invalid_value\", \"not_found\", \"out_of_memory\"), so tests see how "
      "it is raised (tests only).");
}

}  // namespace ferry::python
