// error_of(fn): the message of the ferry::Error that fn throws, for tests that check what an error says.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "ferry/core/error.h"

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

}  // namespace ferry::test
