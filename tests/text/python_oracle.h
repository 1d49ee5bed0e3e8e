// Finding the Python that holds the Hugging Face `tokenizers` package, for the oracle tests and the
// benchmark: $FERRY_PYTHON if set, else the project venv (<source>/.venv/bin/python, made by scripts/venv).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace ferry::text::testing {

/// The Python to use, or nullopt (with `why` set) when none can import `tokenizers`.
inline std::optional<std::string> find_tokenizers_python(const std::string& source_dir, std::string& why) {
  std::string python;
  if (const char* env = std::getenv("FERRY_PYTHON"); env && *env) {
    python = env;
  } else {
    python = source_dir + "/.venv/bin/python";
    if (!std::filesystem::exists(python)) {
      why = "no Python with the `tokenizers` package: " + python +
            " does not exist (run scripts/venv, or set FERRY_PYTHON to a python that has tokenizers)";
      return std::nullopt;
    }
  }
  const std::string probe = "'" + python + "' -c 'import tokenizers' > /dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) {
    why = "'" + python + "' cannot import the `tokenizers` package (pip install tokenizers, or set FERRY_PYTHON)";
    return std::nullopt;
  }
  return python;
}

}  // namespace ferry::text::testing
