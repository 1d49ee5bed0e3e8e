// Helpers shared by the hook / dispatch / offload tests.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "ferry/core/backend.h"
#include "ferry/core/tensor.h"
#include "ferry/io/state_dict.h"
#include "ferry/nn/module.h"

namespace ferry::test {

/// A fresh temporary folder, removed at scope exit.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() / ("ferry-bm-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

inline Tensor random_input(Shape shape, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (auto& x : v) x = nd(rng);
  return Tensor::from_vector(v, std::move(shape));
}

inline io::StateDict state_dict_of(const nn::Module& m) {
  io::StateDict sd;
  for (auto& [name, t] : m.state_dict()) sd.set(name, t);
  return sd;
}

/// Bit-exact equality of two tensors (values, shape, dtype), on any devices.
inline ::testing::AssertionResult same_values(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  for (std::size_t i = 0; i < va.size(); ++i)
    if (va[i] != vb[i]) return ::testing::AssertionFailure() << "element " << i << ": " << va[i] << " vs " << vb[i];
  return ::testing::AssertionSuccess();
}

/// Enables two virtual accelerators for the duration of a test.
class WithVirtualDevices : public ::testing::Test {
 protected:
  void SetUp() override { enable_virtual_devices({.count = 2, .capacity_bytes = 64 << 20}); }
  void TearDown() override { disable_virtual_devices(); }
};

}  // namespace ferry::test
