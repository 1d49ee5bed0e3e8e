// ops::linear / linear_into / matmul: every weight dtype and ISA against a double-precision loop, the AVX2 path
// against the scalar one, GEMV (one row) and GEMM (many rows, several passes and blocks) shapes, misaligned
// inputs, and the argument errors.
#include "ferry/ops/linear.h"

#include <gmock/gmock.h>

#include <cstring>
#include <tuple>

#include "ferry/core/backend.h"
#include "ops/cpu/linear_kernels.h"
#include "ops/op_test_util.h"

namespace ferry::ops {
namespace {

using ::testing::HasSubstr;
using namespace ferry::ops::optest;

struct Reference {
  std::vector<double> y;    // Σ x·w + b in double
  std::vector<double> mag;  // Σ |x·w| + |b|: the scale of the rounding error an f32 sum may make
};

Reference naive_linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  const int64_t N = w.size(0), K = w.size(1), M = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  auto xv = x.to_vector<float>(), wv = w.to_vector<float>();  // to_vector decodes every dtype exactly
  std::vector<float> bv = bias.defined() ? bias.to_vector<float>() : std::vector<float>(N, 0.0f);
  Reference r{std::vector<double>(M * N), std::vector<double>(M * N)};
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = bv[n], a = std::abs(bv[n]);
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(xv[m * K + k]) * double(wv[n * K + k]);
        s += p, a += std::abs(p);
      }
      r.y[m * N + n] = s, r.mag[m * N + n] = a;
    }
  return r;
}

::testing::AssertionResult matches(const std::vector<float>& got, const Reference& ref) {
  return within_summation_noise(got, ref.y, ref.mag);
}

// x rounded to bf16 and back: what every linear path computes with for bf16 weights where cpu::use_bf16_kernels holds
// (nearest-even; the test values are no denormals, where the kernels' flush to zero would differ).
Tensor bf16_rounded(const Tensor& x) { return x.to(DType::BF16).to(DType::F32); }

struct Case {
  int64_t M, N, K;
};

// GEMV (M = 1) and GEMM shapes: tails of every block size (MR 6, NR 16, KC 256, NC 64, MC 288 rows per pass).
// The GEMV walks rows one at a time up to K = 4096 and eight at a time above: {1, 17, 4096} and {1, 33, 4097}
// sit on either side of that switch.
const Case kCases[] = {{1, 1, 1},    {1, 7, 33},   {1, 33, 4097}, {1, 17, 4096}, {1, 5, 7},     {1, 70, 300},
                       {2, 7, 33},   {7, 33, 5},   {6, 16, 256},  {13, 37, 300}, {33, 70, 257}, {300, 19, 17},
                       {5, 129, 513}, {1, 3, 0},   {4, 3, 0}};

TEST(Linear, EveryDTypeAndIsaMatchesNaiveReference) {
  for (DType wt : kWeightDTypes)
    for (const Case& c : kCases)
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(testing::Message() << dtype_name(wt) << " M=" << c.M << " N=" << c.N << " K=" << c.K
                                        << (with_bias ? " bias" : ""));
        Tensor x = random_tensor({c.M, c.K}, DType::F32, 1);
        Tensor w = random_tensor({c.N, c.K}, wt, 2);
        Tensor b = with_bias ? random_tensor({c.N}, DType::F32, 3) : Tensor();
        const Reference ref = naive_linear(x, w, b);
        // bf16 weights on AVX-512 BF16 CPUs: every path rounds x to bf16, so the reference is the same sum on those
        // rounded activations, with the same tolerance.
        const Reference ref_bf16_x = naive_linear(bf16_rounded(x), w, b);
        for_each_isa([&](Isa isa) {
          Tensor y = linear(x, w, b);
          EXPECT_EQ(y.shape(), (Shape{c.M, c.N}));
          EXPECT_TRUE(matches(y.to_vector<float>(), cpu::use_bf16_kernels(isa, wt) ? ref_bf16_x : ref));
        });
      }
}

TEST(Linear, AvxMatchesScalarOnMisalignedInputs) {
  for (DType wt : kWeightDTypes)
    for (const Case& c : {Case{1, 33, 4097}, Case{1, 9, 17}, Case{7, 33, 100}, Case{20, 17, 33}}) {
      SCOPED_TRACE(testing::Message() << dtype_name(wt) << " M=" << c.M << " N=" << c.N << " K=" << c.K);
      Tensor x = misaligned(random_tensor({c.M, c.K}, DType::F32, 4));
      Tensor w = misaligned(random_tensor({c.N, c.K}, wt, 5));
      Tensor b = misaligned(random_tensor({c.N}, DType::BF16, 6));  // bias in another dtype is converted
      const auto want = with_scalar([&] { return linear(x, w, b).to_vector<float>(); });
      const Reference ref = naive_linear(x, w, b);
      // bf16 weights on AVX-512 BF16: x rounded to bf16 on every path; the scalar path on the rounded x as reference.
      const Tensor xr = misaligned(bf16_rounded(x));
      const auto want_r = with_scalar([&] { return linear(xr, w, b).to_vector<float>(); });
      const Reference ref_r = naive_linear(xr, w, b);
      for_each_isa([&](Isa isa) {
        const bool rounds_x = cpu::use_bf16_kernels(isa, wt);
        auto got = linear(x, w, b).to_vector<float>();
        EXPECT_TRUE(matches(got, rounds_x ? ref_r : ref));
        const auto& scalar = rounds_x ? want_r : want;
        Reference scalar_as_ref{std::vector<double>(scalar.begin(), scalar.end()), (rounds_x ? ref_r : ref).mag};
        EXPECT_TRUE(matches(got, scalar_as_ref));
      });
    }
}

TEST(Linear, LeadingDimensionsAreKept) {
  Tensor x = random_tensor({2, 3, 5}, DType::F32, 7);
  Tensor w = random_tensor({4, 5}, DType::F16, 8);
  Tensor y = linear(x, w);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  EXPECT_TRUE(matches(y.to_vector<float>(), naive_linear(x, w, {})));
  Tensor v = random_tensor({5}, DType::F32, 9);  // a 1-D x is one token
  Tensor yv = linear(v, w);
  EXPECT_EQ(yv.shape(), (Shape{4}));
  EXPECT_TRUE(matches(yv.to_vector<float>(), naive_linear(v, w, {})));
  Tensor empty = Tensor::empty({0, 5}, DType::F32);
  EXPECT_EQ(linear(empty, w).shape(), (Shape{0, 4}));
}

TEST(Linear, SpecialValuesPropagate) {
  // A NaN weight (e4m3fn 0x7F) makes its output NaN and an inf weight (e5m2 0x7C) its output inf, whether the
  // element sits in a vector body or a tail, in a block of 8 rows or a leftover row, on every ISA.
  const int64_t N = 10, K = 40;
  Tensor x = Tensor::from_vector(std::vector<float>(K, 1.0f), {1, K});
  for (auto [dtype_, one, special] : {std::tuple{DType::F8_E4M3FN, 0x38, 0x7F}, std::tuple{DType::F8_E5M2, 0x3C, 0x7C}}) {
    const DType dtype = dtype_;  // a named copy: the lambda below captures it
    std::vector<uint8_t> bytes(N * K, static_cast<uint8_t>(one));
    bytes[1 * K + 3] = bytes[5 * K + 20] = bytes[9 * K + 38] = static_cast<uint8_t>(special);
    bytes[2 * K + 7] = static_cast<uint8_t>(one | 0x80);  // -1
    auto st = Storage::allocate(Device::cpu(), bytes.size());
    std::memcpy(st->data(), bytes.data(), bytes.size());
    Tensor w8 = Tensor::from_storage(st, 0, {N, K}, dtype);
    for_each_isa([&](Isa) {
      auto y = linear(x, w8).to_vector<float>();
      for (int64_t n = 0; n < N; ++n) {
        if (n == 1 || n == 5 || n == 9) {
          if (dtype == DType::F8_E4M3FN) EXPECT_TRUE(std::isnan(y[n])) << n;
          else EXPECT_EQ(y[n], INFINITY) << n;
        } else {
          EXPECT_EQ(y[n], n == 2 ? K - 2.0f : float(K)) << n;
        }
      }
    });
  }
}

TEST(LinearInto, WritesIntoCallerBuffer) {
  Tensor x = random_tensor({3, 40}, DType::F32, 10), w = random_tensor({9, 40}, DType::BF16, 11);
  Tensor b = random_tensor({9}, DType::F32, 12);
  Tensor out = Tensor::full({3, 9}, 123.0, DType::F32);
  for_each_isa([&](Isa isa) {
    linear_into(x, w, b, out);
    EXPECT_TRUE(matches(out.to_vector<float>(),
                        naive_linear(cpu::use_bf16_kernels(isa, DType::BF16) ? bf16_rounded(x) : x, w, b)));
  });
  EXPECT_THAT(error_of([&] { linear_into(x, w, b, Tensor::empty({3, 8}, DType::F32)); }), HasSubstr("[3, 9]"));
  EXPECT_THAT(error_of([&] { linear_into(x, w, b, Tensor::empty({3, 9}, DType::F16)); }), HasSubstr("f32"));
  Tensor xs = random_tensor({9, 9}, DType::F32, 13), ws = random_tensor({9, 9}, DType::F32, 14);
  EXPECT_THAT(error_of([&] { linear_into(xs, ws, {}, xs); }), HasSubstr("overlaps"));
}

TEST(Linear, BadArgumentsNameTheShapes) {
  Tensor x = random_tensor({2, 5}, DType::F32, 1), w = random_tensor({3, 4}, DType::F16, 2);
  std::string msg = error_of([&] { linear(x, w); });
  EXPECT_THAT(msg, HasSubstr("ops::linear"));
  EXPECT_THAT(msg, HasSubstr("[2, 5]"));
  EXPECT_THAT(msg, HasSubstr("[3, 4]"));
  EXPECT_THAT(error_of([&] { linear(x, random_tensor({5}, DType::F32, 3)); }), HasSubstr("2-D"));
  EXPECT_THAT(error_of([&] { linear(x, Tensor::zeros({3, 5}, DType::I32)); }), HasSubstr("unsupported dtype"));
  EXPECT_THAT(error_of([&] { linear(x, Tensor::zeros({3, 5}, DType::F64)); }), HasSubstr("unsupported dtype"));
  EXPECT_THAT(error_of([&] { linear(x.to(DType::F16), random_tensor({3, 5}, DType::F16, 3)); }),
              HasSubstr("must be f32"));
  Tensor w5 = random_tensor({3, 5}, DType::F32, 4);
  EXPECT_THAT(error_of([&] { linear(x, w5, random_tensor({4}, DType::F32, 5)); }), HasSubstr("bias"));
  EXPECT_THAT(error_of([&] { linear(x, Tensor::empty({3, 5}, DType::F32, Device::meta())); }), HasSubstr("no data"));
  EXPECT_THAT(error_of([&] { linear(Tensor(), w5); }), HasSubstr("undefined"));
  EXPECT_THAT(error_of([&] { linear(Tensor::from_vector(std::vector<float>{1}, {}), w5); }),
              HasSubstr("at least 1 dimension"));
}

TEST(Linear, TensorsOnDifferentDevicesAreRejected) {
  enable_virtual_devices({.count = 1, .capacity_bytes = 1 << 20});
  Tensor x = random_tensor({2, 5}, DType::F32, 1), w = random_tensor({3, 5}, DType::F32, 2);
  Tensor xv = x.to(Device::virt(0)), wv = w.to(Device::virt(0));
  Tensor y = linear(xv, wv);  // virtual devices are host memory: the cpu kernels run, the result stays there
  EXPECT_EQ(y.device(), Device::virt(0));
  EXPECT_TRUE(matches(y.to_vector<float>(), naive_linear(x, w, {})));
  EXPECT_THAT(error_of([&] { linear(xv, w); }), HasSubstr("different devices"));
  disable_virtual_devices();
}

TEST(Matmul, MatchesNaiveReference) {
  for (const Case& c : {Case{1, 1, 1}, Case{1, 33, 7}, Case{7, 33, 300}, Case{13, 70, 257}, Case{300, 17, 9}}) {
    SCOPED_TRACE(testing::Message() << "M=" << c.M << " N=" << c.N << " K=" << c.K);
    Tensor a = random_tensor({c.M, c.K}, DType::F32, 1), b = random_tensor({c.K, c.N}, DType::F32, 2);
    // a · b is linear(a, bᵀ): build bᵀ for the reference.
    auto bv = b.to_vector<float>();
    std::vector<float> bt(bv.size());
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t n = 0; n < c.N; ++n) bt[n * c.K + k] = bv[k * c.N + n];
    const Reference ref = naive_linear(a, Tensor::from_vector(bt, {c.N, c.K}), {});
    for_each_isa([&](Isa) {
      Tensor y = matmul(a, b);
      EXPECT_EQ(y.shape(), (Shape{c.M, c.N}));
      EXPECT_TRUE(matches(y.to_vector<float>(), ref));
    });
  }
  EXPECT_THAT(error_of([] { matmul(Tensor::zeros({2, 3}, DType::F32), Tensor::zeros({4, 2}, DType::F32)); }),
              HasSubstr("do not chain"));
  EXPECT_THAT(error_of([] { matmul(Tensor::zeros({2, 3}, DType::F32), Tensor::zeros({3, 2}, DType::BF16)); }),
              HasSubstr("must be f32"));
}

// The OpenBLAS seam the benchmarks compare against computes the same product (both operand layouts, with bias).
TEST(BlasSeam, MatchesNaiveReferenceWhenLinked) {
  if (!cpu::have_blas()) GTEST_SKIP() << "ferry_ops built without OpenBLAS";
  Tensor x = random_tensor({7, 33}, DType::F32, 1), w = random_tensor({9, 33}, DType::F32, 2);
  Tensor b = random_tensor({9}, DType::F32, 3), y = Tensor::empty({7, 9}, DType::F32);
  ASSERT_TRUE(cpu::blas_sgemm(7, 9, 33, x.data<float>(), w.data<float>(), true, b.data<float>(), y.data<float>()));
  EXPECT_TRUE(matches(y.to_vector<float>(), naive_linear(x, w, b)));
  Tensor wt = Tensor::empty({33, 9}, DType::F32);  // the same weight as [K, N]
  for (int64_t n = 0; n < 9; ++n)
    for (int64_t k = 0; k < 33; ++k) wt.data<float>()[k * 9 + n] = w.data<float>()[n * 33 + k];
  ASSERT_TRUE(cpu::blas_sgemm(7, 9, 33, x.data<float>(), wt.data<float>(), false, nullptr, y.data<float>()));
  EXPECT_TRUE(matches(y.to_vector<float>(), naive_linear(x, w, {})));
}

}  // namespace
}  // namespace ferry::ops
