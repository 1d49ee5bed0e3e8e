// The extension module ferry._ferry. The package's __init__.py re-exports what users call; each bind_* function
// (one per file) adds one part of the API.
#include "bindings.h"

NB_MODULE(_ferry, m) {
  m.doc() = "ferry's C++ library as a Python extension module (use the `ferry` package, not this module)";
  ferry::python::bind_errors(m);
  ferry::python::bind_planning(m);
  ferry::python::bind_tokenizer(m);
  ferry::python::bind_models(m);
  ferry::python::bind_generate(m);
  ferry::python::bind_runtime(m);
}
