// Helpers for the io tests: a temporary folder, raw file writing, hand-built safetensors bytes, and an
// expect-error macro that checks the message text.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/core/tensor.h"

namespace ferry::iotest {

/// A fresh folder under $TMPDIR (or /tmp), removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ferry_io_test_XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

/// A safetensors file from a header text (used verbatim) and a data section.
inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out;
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  return out + header + data;
}

/// Bytes of a host tensor.
inline std::string bytes_of(const Tensor& t) {
  if (t.nbytes() == 0) return {};
  return std::string(static_cast<const char*>(t.raw_data()), t.nbytes());
}

/// Bit-exact equality of two host tensors (shape, dtype, bytes).
inline ::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return ::testing::AssertionFailure() << shape_str(a.shape()) << " vs " << shape_str(b.shape());
  if (a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << dtype_name(a.dtype()) << " vs " << dtype_name(b.dtype());
  if (bytes_of(a.to(Device::cpu())) != bytes_of(b.to(Device::cpu())))
    return ::testing::AssertionFailure() << "bytes differ";
  return ::testing::AssertionSuccess();
}

}  // namespace ferry::iotest

/// Expects `stmt` to throw ferry::Error whose what() contains `needle`.
#define EXPECT_FERRY_ERROR(stmt, needle) FERRY_EXPECT_ERROR_IMPL(stmt, needle, false, ::ferry::ErrorKind::InvalidValue)

/// Expects `stmt` to throw ferry::Error of kind `error_kind` (an ErrorKind) whose what() contains `needle`.
#define EXPECT_FERRY_ERROR_KIND(stmt, error_kind, needle) FERRY_EXPECT_ERROR_IMPL(stmt, needle, true, error_kind)

#define FERRY_EXPECT_ERROR_IMPL(stmt, needle, check_kind, error_kind)                             \
  do {                                                                                          \
    try {                                                                                       \
      stmt;                                                                                     \
      ADD_FAILURE() << "expected ferry::Error containing \"" << (needle) << "\"";               \
    } catch (const ::ferry::Error& e_) {                                                        \
      EXPECT_NE(std::string(e_.what()).find(needle), std::string::npos)                         \
          << "message: " << e_.what() << "\nexpected to contain: " << (needle);                 \
      if (check_kind) {                                                                         \
        EXPECT_STREQ(::ferry::error_kind_name(e_.kind()), ::ferry::error_kind_name(error_kind)) \
            << "message: " << e_.what();                                                        \
      }                                                                                         \
    }                                                                                           \
  } while (0)
