// Helpers for the ops tests: random tensors in every dtype, misaligned copies, a loop over every ISA this CPU
// runs, and closeness checks that report the worst element.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ferry/core/cpu_features.h"
#include "ferry/core/error.h"
#include "ferry/core/storage.h"
#include "ferry/core/tensor.h"
#include "support/error_of.h"

namespace ferry::ops::optest {

/// The odd lengths every kernel is swept over: empty, below/at/above one and two 8-lane vectors, big tails.
inline const std::vector<int64_t> kOddSizes = {1, 2, 7, 8, 9, 15, 16, 17, 33, 100, 257, 4097};

/// Float dtypes weights may be stored in.
inline const std::vector<DType> kWeightDTypes = {DType::F32, DType::F16, DType::BF16, DType::F8_E4M3FN,
                                                 DType::F8_E5M2};

inline std::vector<float> random_floats(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

/// Uniform values in [lo, hi) rounded to `dtype`.
inline Tensor random_tensor(Shape shape, DType dtype, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  auto v = random_floats(shape_numel(shape), seed, lo, hi);
  return Tensor::from_vector(v, std::move(shape), dtype);
}

/// A copy of t whose first element sits `misalign` bytes past a 64-byte boundary (default: one element).
inline Tensor misaligned(const Tensor& t, std::size_t misalign = 0) {
  if (misalign == 0) misalign = dtype_size(t.dtype());
  auto storage = Storage::allocate(Device::cpu(), t.nbytes() + 64);
  Tensor m = Tensor::from_storage(storage, misalign, t.shape(), t.dtype());
  m.copy_from(t);
  return m;
}

/// Runs fn once per supported ISA (Scalar first) with that ISA forced.
inline void for_each_isa(const std::function<void(Isa)>& fn) {
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(std::string("isa ") + std::string(isa_name(isa)));
    ScopedIsa scoped(isa);
    fn(isa);
  }
}

/// Runs fn with the scalar reference path forced.
template <class F>
auto with_scalar(F&& fn) {
  ScopedIsa scoped(Isa::Scalar);
  return fn();
}

/// |got − want| ≤ atol + rtol·|want| elementwise (NaN matches NaN, ±inf must match exactly); on failure reports
/// the count of bad elements and the worst one.
inline ::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<double>& want,
                                            double rtol, double atol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  std::size_t bad = 0, worst = 0;
  double worst_excess = -1;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    bool ok;
    double excess = 0;
    if (std::isnan(w) || std::isnan(g)) ok = std::isnan(w) && std::isnan(g), excess = ok ? 0 : INFINITY;
    else if (std::isinf(w) || std::isinf(g)) ok = g == w, excess = ok ? 0 : INFINITY;
    else excess = std::abs(g - w) - (atol + rtol * std::abs(w)), ok = excess <= 0;
    if (!ok) ++bad;
    if (!ok && excess > worst_excess) worst_excess = excess, worst = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ; worst at " << worst
                                       << ": got " << got[worst] << ", want " << want[worst]
                                       << " (rtol " << rtol << ", atol " << atol << ")";
}

inline ::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<float>& want,
                                            double rtol, double atol) {
  return all_close(got, std::vector<double>(want.begin(), want.end()), rtol, atol);
}

/// A dot-product result against its double reference: |got − want| ≤ 2e-5·mag + 1e-6 elementwise, where mag[i] is
/// Σ|products| of element i. f32 sums of K products in any order stay within a few·√K ulps of that; 2e-5 is far below
/// the size of one missing or doubled product (≈ mag / K for the test sizes) yet above reordering noise.
inline ::testing::AssertionResult within_summation_noise(const std::vector<float>& got, const std::vector<double>& want,
                                                         const std::vector<double>& mag) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = 2e-5 * mag[i] + 1e-6;
    if (!(std::abs(got[i] - want[i]) <= tol))
      return ::testing::AssertionFailure() << "element " << i << " of " << got.size() << ": got " << got[i]
                                           << ", want " << want[i] << " (tol " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

/// Bit-for-bit equality (NaNs compare by being NaN).
inline ::testing::AssertionResult all_equal(const std::vector<float>& got, const std::vector<float>& want) {
  return all_close(got, want, 0.0, 0.0);
}

using test::error_of;

}  // namespace ferry::ops::optest
