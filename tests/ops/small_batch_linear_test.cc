// ops::linear on a few rows (batched decode: 2 <= M <= small_batch_max_rows, f32 / f16 / bf16 weights) and the
// small-batch kernels of every ISA directly: against a double-precision loop, and each row against ops::linear of that row
// alone (the GEMV), for row counts that leave every tail of the 6-row register tile, K with tails of the 16- and
// 32-element steps (and shorter than one step), N that is no multiple of the kernels' row blocks (4, 2), with and
// without bias; plus the routing, K = 0 and misaligned weights. For bf16 weights on AVX-512 BF16 CPUs the references
// sum on x rounded to bf16, as every path computes there (tests/ops/bf16_linear_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ferry/ops/linear.h"
#include "ops/cpu/linear_kernels.h"
#include "ops/op_test_util.h"

namespace ferry::ops {
namespace {

using namespace ferry::ops::optest;

const DType kDTypes[] = {DType::F32, DType::F16, DType::BF16};
const int64_t kRows[] = {2, 3, 5, 7, 16, 33, 64};
const int64_t kDepths[] = {4096, 1000, 17};
constexpr int64_t kN = 37;  // 4·9 + 1: a partial block for R = 4 and R = 2

// x as the kernels of `isa` compute with it for weights of dtype wt: rounded to bf16 for bf16 weights on AVX-512
// BF16 CPUs (cpu::use_bf16_kernels; nearest-even, as Tensor::to rounds the test's values, none of them denormal).
std::vector<float> effective_x(const std::vector<float>& xv, Isa isa, DType wt) {
  if (!cpu::use_bf16_kernels(isa, wt)) return xv;
  return Tensor::from_vector(xv, {int64_t(xv.size())}, DType::BF16).to_vector<float>();
}

// y[m, n] = Σ_k x[m, k] · w[n, k] (+ b[n]) in double, on the weights' exact values.
std::vector<double> reference(const std::vector<float>& xv, const std::vector<float>& wv, const std::vector<float>* bv,
                              int64_t M, int64_t N, int64_t K) {
  std::vector<double> y(static_cast<std::size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = bv ? (*bv)[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) s += double(xv[m * K + k]) * double(wv[n * K + k]);
      y[m * N + n] = s;
    }
  return y;
}

double rms(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e * e;
  return v.empty() ? 0.0 : std::sqrt(s / double(v.size()));
}

// |got − want| ≤ rel · max(|want|, scale) for every element: relative error, with the outputs' rms as the floor
// for the few that cancel to near zero. f32 sums in another order differ by ~1e-7 of that here.
::testing::AssertionResult close(const std::vector<float>& got, const std::vector<double>& want, double rel,
                                 double scale) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = rel * std::max(std::abs(want[i]), scale);
    if (!(std::abs(double(got[i]) - want[i]) <= tol))
      return ::testing::AssertionFailure() << "element " << i << " of " << got.size() << ": got " << got[i]
                                           << ", want " << want[i] << " (tol " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

TEST(SmallBatchLinear, TakesTheRowsBetweenGemvAndGemm) {
  for (Isa isa : {Isa::Scalar, Isa::AVX2, Isa::AVX512})
    for (DType wt : kDTypes) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(dtype_name(wt)));
      const int64_t max_rows = cpu::small_batch_max_rows(isa, wt);
      EXPECT_FALSE(cpu::use_small_batch(isa, wt, 1));
      EXPECT_TRUE(cpu::use_small_batch(isa, wt, 2));
      EXPECT_TRUE(cpu::use_small_batch(isa, wt, max_rows));
      if (cpu::use_bf16_kernels(isa, wt)) {  // bf16 on AVX-512 BF16: every row count (batch invariance)
        EXPECT_EQ(max_rows, cpu::kSmallBatchMaxRowsBf16);
        EXPECT_TRUE(cpu::use_small_batch(isa, wt, 100000));
        continue;
      }
      EXPECT_EQ(max_rows, isa < Isa::AVX512   ? cpu::kSmallBatchMaxRowsAvx2
                          : wt == DType::F32 ? cpu::kSmallBatchMaxRowsF32
                                             : cpu::kSmallBatchMaxRows);
      EXPECT_FALSE(cpu::use_small_batch(isa, wt, max_rows + 1));
    }
  EXPECT_FALSE(cpu::use_small_batch(Isa::AVX512, DType::F8_E4M3FN, 4));
  EXPECT_FALSE(cpu::use_small_batch(Isa::AVX512, DType::Q8_0, 4));
}

TEST(SmallBatchLinear, EveryDTypeIsaAndShapeMatchesDoubleAndTheOneRowGemv) {
  for (DType wt : kDTypes)
    for (int64_t K : kDepths) {
      const Tensor w = random_tensor({kN, K}, wt, 3);
      const auto wv = w.to_vector<float>();  // exact values of the weights
      const Tensor bias = random_tensor({kN}, DType::F32, 4);
      const auto bv = bias.to_vector<float>();
      for (int64_t M : kRows) {
        const Tensor x = random_tensor({M, K}, DType::F32, static_cast<uint32_t>(100 + M));
        const auto xv = x.to_vector<float>();
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(wt)) + " M=" + std::to_string(M) + " K=" + std::to_string(K) +
                       (with_bias ? " bias" : ""));
          const Tensor b = with_bias ? bias : Tensor();
          for_each_isa([&](Isa isa) {
            const std::vector<double> want =
                reference(effective_x(xv, isa, wt), wv, with_bias ? &bv : nullptr, M, kN, K);
            const double scale = rms(want);
            // ops::linear (the small-batch kernel up to small_batch_max_rows, else the GEMM) and the kernel itself.
            const auto got = linear(x, w, b).to_vector<float>();
            EXPECT_TRUE(close(got, want, 1e-5, scale));
            std::vector<float> direct(static_cast<std::size_t>(M * kN));
            cpu::small_batch(isa, wt, w.raw_data(), kN, K, M, x.data<float>(), with_bias ? bv.data() : nullptr,
                             direct.data());
            EXPECT_TRUE(close(direct, want, 1e-5, scale));
            // Each row against the GEMV of that row alone (same ISA).
            for (int64_t m = 0; m < M; ++m) {
              const auto one = linear(x.slice(m, m + 1), w, b).to_vector<float>();
              const std::vector<double> one_d(one.begin(), one.end());
              const std::vector<float> row(got.begin() + m * kN, got.begin() + (m + 1) * kN);
              ASSERT_TRUE(close(row, one_d, 1e-5, scale)) << "row " << m;
              const std::vector<float> drow(direct.begin() + m * kN, direct.begin() + (m + 1) * kN);
              ASSERT_TRUE(close(drow, one_d, 1e-5, scale)) << "row " << m << " (kernel)";
            }
          });
        }
      }
    }
}

TEST(SmallBatchLinear, EmptyReductionGivesTheBias) {
  for (DType wt : kDTypes) {
    const Tensor w = Tensor::zeros({5, 0}, wt), x = Tensor::zeros({3, 0}, DType::F32);
    const Tensor bias = random_tensor({5}, DType::F32, 6);
    const auto bv = bias.to_vector<float>();
    for_each_isa([&](Isa) {
      const auto y = linear(x, w, bias).to_vector<float>();
      ASSERT_EQ(y.size(), 15u);
      for (int m = 0; m < 3; ++m)
        for (int n = 0; n < 5; ++n) EXPECT_EQ(y[m * 5 + n], bv[n]);
      for (float v : linear(x, w).to_vector<float>()) EXPECT_EQ(v, 0.0f);
    });
  }
}

TEST(SmallBatchLinear, MisalignedWeightsAndActivations) {
  const int64_t M = 9, N = 11, K = 531;
  for (DType wt : kDTypes) {
    SCOPED_TRACE(std::string(dtype_name(wt)));
    const Tensor w = random_tensor({N, K}, wt, 8), x = random_tensor({M, K}, DType::F32, 9);
    const Tensor wm = misaligned(w), xm = misaligned(x);
    for_each_isa([&](Isa isa) {
      const auto want = reference(effective_x(x.to_vector<float>(), isa, wt), w.to_vector<float>(), nullptr, M, N, K);
      EXPECT_TRUE(close(linear(xm, wm).to_vector<float>(), want, 1e-5, rms(want)));
    });
  }
}

// The driver itself takes any M (ops::linear sends it 2 .. small_batch_max_rows): more rows than the routing allows,
// through the kernels of every ISA.
TEST(SmallBatchLinear, DriverTakesAnyRowCount) {
  const int64_t M = cpu::kSmallBatchMaxRows + 7, N = 10, K = 100;
  for (DType wt : kDTypes) {
    SCOPED_TRACE(std::string(dtype_name(wt)));
    const Tensor w = random_tensor({N, K}, wt, 10), x = random_tensor({M, K}, DType::F32, 11);
    const Tensor bias = random_tensor({N}, DType::F32, 12);
    const auto bv = bias.to_vector<float>();
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE(std::string(isa_name(isa)));
      const auto want = reference(effective_x(x.to_vector<float>(), isa, wt), w.to_vector<float>(), &bv, M, N, K);
      std::vector<float> y(static_cast<std::size_t>(M * N));
      cpu::small_batch(isa, wt, w.raw_data(), N, K, M, x.data<float>(), bv.data(), y.data());
      EXPECT_TRUE(close(y, want, 1e-5, rms(want)));
    }
  }
}

}  // namespace
}  // namespace ferry::ops
