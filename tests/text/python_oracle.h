// Finding the Python that holds the Hugging Face `tokenizers` package, for the oracle tests and the
// benchmark: $FERRY_PYTHON if set, else the project venv (<source>/.venv/bin/python, made by scripts/venv).
// OracleSuite: a test fixture that runs one tests/reference script once per suite and keeps its oracle.json.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
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

/// A fixture whose suite runs `tests/reference/<Derived::kScript> --out DIR` once (DIR a fresh temp folder) and
/// parses DIR/oracle.json as `Json` into oracle(); every test skips when no Python has `tokenizers` or the script
/// exits 77 (its stderr is the reason), and fails when the script fails otherwise. Derived names the script:
///   class UnigramOracle : public OracleSuite<UnigramOracle, nlohmann::json> {
///    public: static constexpr const char* kScript = "unigram_oracle.py"; };
template <class Derived, class Json>
class OracleSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    const auto python = find_tokenizers_python(FERRY_SOURCE_DIR, why);
    if (!python) {
      skip_reason_ = new std::string(why);
      return;
    }
    char pattern[] = "/tmp/ferry_oracle_XXXXXX";
    if (!mkdtemp(pattern)) {
      setup_error_ = new std::string("mkdtemp failed");
      return;
    }
    dir_ = new std::filesystem::path(pattern);
    const std::string cmd = "'" + *python + "' '" FERRY_SOURCE_DIR "/tests/reference/" + Derived::kScript +
                            "' --out '" + dir_->string() + "' 2> '" + (*dir_ / "log.txt").string() + "'";
    const int status = std::system(cmd.c_str());
    if (status != 0) {
      std::ifstream log(*dir_ / "log.txt");
      const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      if (WIFEXITED(status) && WEXITSTATUS(status) == 77) skip_reason_ = new std::string(text);
      else setup_error_ = new std::string("the oracle script failed: " + cmd + "\n" + text);
      return;
    }
    std::ifstream in(*dir_ / "oracle.json");
    oracle_ = new Json(Json::parse(in));
  }
  static void TearDownTestSuite() {
    if (dir_) std::filesystem::remove_all(*dir_);
    delete dir_;
    delete oracle_;
    delete skip_reason_;
    delete setup_error_;
    dir_ = nullptr;
    oracle_ = nullptr;
    skip_reason_ = setup_error_ = nullptr;
  }
  void SetUp() override {
    if (skip_reason_) GTEST_SKIP() << *skip_reason_;
    ASSERT_EQ(setup_error_, nullptr) << *setup_error_;
    ASSERT_NE(oracle_, nullptr);
  }
  static const Json& oracle() { return *oracle_; }
  static const std::filesystem::path& dir() { return *dir_; }

 private:
  static inline std::filesystem::path* dir_ = nullptr;
  static inline Json* oracle_ = nullptr;
  static inline std::string* skip_reason_ = nullptr;
  static inline std::string* setup_error_ = nullptr;
};

}  // namespace ferry::text::testing
