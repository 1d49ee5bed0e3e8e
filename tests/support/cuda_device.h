// CUDA tests run in full on a machine with an NVIDIA GPU (scripts/device-check) and skip everywhere else with the
// one line "no CUDA device". Their suites are named Cuda* so `--gtest_filter='Cuda*'` runs exactly them.
#pragma once

#include <gtest/gtest.h>

#include "ferry/core/backend.h"

namespace ferry::test {

inline bool cuda_device_present() {
  auto cuda = find_backend(Device::Kind::CUDA);
  return cuda && cuda->device_count() > 0;
}

}  // namespace ferry::test

#define FERRY_REQUIRE_CUDA()                                        \
  do {                                                              \
    if (!::ferry::test::cuda_device_present()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)
