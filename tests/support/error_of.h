// error_of(fn): the message of the ferry::Error that fn throws, for tests that check what an error says;
// error_kind_of(fn): its kind, for tests that check how callers (the Python bindings) will classify it.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <ostream>
#include <string>

#include "ferry/core/error.h"

namespace ferry {

/// gtest prints an ErrorKind by name ("not_found"), not as a number.
inline void PrintTo(ErrorKind kind, std::ostream* os) { *os << error_kind_name(kind); }

}  // namespace ferry

namespace ferry::test {

/// The message of the ferry::Error `fn` throws; fails the test when it throws nothing or something else.
template <class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ferry::Error, got std::exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected ferry::Error, nothing was thrown";
  return {};
}

/// The kind of the ferry::Error `fn` throws; fails the test (and returns InvalidValue) when it throws nothing or
/// something else.
template <class F>
ErrorKind error_kind_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.kind();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ferry::Error, got std::exception: " << e.what();
    return ErrorKind::InvalidValue;
  }
  ADD_FAILURE() << "expected ferry::Error, nothing was thrown";
  return ErrorKind::InvalidValue;
}

}  // namespace ferry::test
