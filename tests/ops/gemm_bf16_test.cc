// The AVX-512 BF16 GEMM for bf16 weights (ops/cpu/gemm_bf16.cc, gemm_avx512bf16.cc): against a double-precision loop
// on activations rounded to bf16 (nearest-even) the way the kernel rounds them, for M, N and K off every tile and
// block size (MR 12, NR 32, KC 256, NC 128, MC 288 rows per pass), K odd, with and without bias; the microkernel's
// accumulate mode and partial tiles; the rounding itself; and the routing (only AVX512 with AVX512_BF16, only bf16
// weights, the default there; FERRY_ISA=avx2 keeps the f32 path). Skipped on CPUs without AVX512_BF16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ferry/ops/linear.h"
#include "ops/cpu/linear_kernels.h"
#include "ops/bf16_test_util.h"
#include "ops/op_test_util.h"

namespace ferry::ops {
namespace {

using namespace ferry::ops::optest;

::testing::AssertionResult matches(const std::vector<float>& got, const Bf16Ref& ref) {
  return within_summation_noise(got, ref.y, ref.mag);
}

struct Shape3 {
  int64_t M, N, K;
};

TEST(GemmBf16, EveryTileAndBlockTailMatchesDoubleOnRoundedX) {
  SKIP_WITHOUT_AVX512_BF16();
  const Shape3 shapes[] = {{1, 1, 1},     {2, 3, 2},     {12, 32, 256}, {13, 33, 257}, {11, 31, 31},
                           {25, 129, 513}, {300, 40, 33}, {289, 17, 3},  {70, 160, 600}, {5, 300, 1}};
  for (const Shape3& s : shapes)
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(testing::Message() << "M=" << s.M << " N=" << s.N << " K=" << s.K << (with_bias ? " bias" : ""));
      const Tensor x = random_tensor({s.M, s.K}, DType::F32, 11);
      const Tensor w = random_tensor({s.N, s.K}, DType::BF16, 12);
      const Tensor b = random_tensor({s.N}, DType::F32, 13);
      const auto xv = x.to_vector<float>(), wv = w.to_vector<float>(), bv = b.to_vector<float>();
      std::vector<float> y(static_cast<std::size_t>(s.M * s.N), -7.0f);
      cpu::gemm_bf16(s.M, s.N, s.K, xv.data(), w.raw_data(), with_bias ? bv.data() : nullptr, y.data());
      EXPECT_TRUE(matches(y, bf16_reference(xv, wv, with_bias ? &bv : nullptr, s.M, s.N, s.K)));
    }
}

TEST(GemmBf16, MisalignedOperands) {
  SKIP_WITHOUT_AVX512_BF16();
  const int64_t M = 30, N = 45, K = 77;
  const Tensor x = misaligned(random_tensor({M, K}, DType::F32, 21));
  const Tensor w = misaligned(random_tensor({N, K}, DType::BF16, 22));
  const auto xv = x.to_vector<float>(), wv = w.to_vector<float>();
  std::vector<float> y(static_cast<std::size_t>(M * N));
  cpu::gemm_bf16(M, N, K, x.data<float>(), w.raw_data(), nullptr, y.data());
  EXPECT_TRUE(matches(y, bf16_reference(xv, wv, nullptr, M, N, K)));
}

// The microkernel on one partial tile: accumulate adds to c, bias starts from it, and nothing outside mr × nr is
// written.
TEST(GemmBf16, MicrokernelAccumulatesAndKeepsOutsideTheTile) {
  SKIP_WITHOUT_AVX512_BF16();
  constexpr int MR = cpu::kBf16MR, NR = cpu::kBf16NR;
  const int64_t K = 37, pairs = (K + 1) / 2, ldc = NR + 5;
  const auto xv = random_floats(MR * K, 31), wv = Tensor::from_vector(random_floats(NR * K, 32), {NR, K},
                                                                      DType::BF16).to_vector<float>();
  const Tensor w = Tensor::from_vector(wv, {NR, K}, DType::BF16);
  const auto bias = random_floats(NR, 33);
  std::vector<uint32_t> a(pairs * MR), bp(pairs * NR);
  for (int mr : {MR, 5, 1})
    for (int nr : {NR, 17, 16, 3})
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE(testing::Message() << "mr=" << mr << " nr=" << nr << (accumulate ? " accumulate" : ""));
        cpu::avx512bf16::pack_x(xv.data(), K, 0, mr, 0, K, a.data());
        cpu::avx512bf16::pack_w(w.raw_data(), K, 0, nr, 0, K, bp.data());
        std::vector<float> c(MR * ldc);
        for (std::size_t i = 0; i < c.size(); ++i) c[i] = float(i % 7) - 3.0f;
        const std::vector<float> before = c;
        cpu::avx512bf16::micro(pairs, a.data(), bp.data(), c.data(), ldc, mr, nr, accumulate,
                               accumulate ? nullptr : bias.data());
        for (int i = 0; i < MR; ++i)
          for (int64_t j = 0; j < ldc; ++j) {
            const float got = c[i * ldc + j];
            if (i >= mr || j >= nr) {
              EXPECT_EQ(got, before[i * ldc + j]) << i << "," << j;
              continue;
            }
            double s = accumulate ? before[i * ldc + j] : bias[j], mag = std::abs(s);
            for (int64_t k = 0; k < K; ++k) {
              const double p = double(round_bf16(xv[i * K + k])) * wv[j * K + k];
              s += p, mag += std::abs(p);
            }
            EXPECT_NEAR(got, s, 2e-5 * mag + 1e-6) << i << "," << j;
          }
      }
}

TEST(GemmBf16, ActivationsRoundToNearestEven) {
  SKIP_WITHOUT_AVX512_BF16();
  // 1 + 2⁻⁸ is halfway between 1 and 1 + 2⁻⁷: even → 1; 1 + 3·2⁻⁸ → 1 + 2⁻⁶ (even); just above halfway rounds up.
  const float vals[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -2.5f, INFINITY, NAN, 0.0f};
  const int64_t K = sizeof(vals) / sizeof(vals[0]);
  std::vector<uint32_t> a((K + 1) / 2 * cpu::kBf16MR);
  cpu::avx512bf16::pack_x(vals, K, 0, 1, 0, K, a.data());
  for (int64_t k = 0; k < K; ++k) {
    const uint32_t word = a[k / 2 * cpu::kBf16MR];
    const uint32_t bits = (k % 2 ? word >> 16 : word & 0xFFFFu) << 16;
    float got;
    std::memcpy(&got, &bits, 4);
    if (std::isnan(vals[k])) EXPECT_TRUE(std::isnan(got));
    else EXPECT_EQ(got, round_bf16(vals[k])) << k;
  }
  EXPECT_EQ(round_bf16(1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(round_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
  EXPECT_EQ(round_bf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
}

TEST(GemmBf16, RoutingNeedsAvx512Bf16AndBf16Weights) {
  EXPECT_FALSE(cpu::use_gemm_bf16(Isa::AVX2, DType::BF16));
  EXPECT_FALSE(cpu::use_gemm_bf16(Isa::Scalar, DType::BF16));
  EXPECT_FALSE(cpu::use_gemm_bf16(Isa::AVX512, DType::F16));
  EXPECT_FALSE(cpu::use_gemm_bf16(Isa::AVX512, DType::F32));
  EXPECT_EQ(cpu::use_gemm_bf16(Isa::AVX512, DType::BF16), have_avx512_bf16());
}

// cpu::gemm of bf16 weights takes this path on AVX512 (rounding x) and the f32 one on AVX2. (ops::linear takes the
// small-batch kernel for every row count there instead: tests/ops/bf16_linear_test.cc.)
TEST(GemmBf16, GemmTakesItOnAvx512AndNotOnAvx2) {
  SKIP_WITHOUT_AVX512_BF16();
  const int64_t M = 71, N = 40, K = 300;
  const Tensor x = random_tensor({M, K}, DType::F32, 41);
  const Tensor w = random_tensor({N, K}, DType::BF16, 42);
  const auto xv = x.to_vector<float>();
  std::vector<float> direct(static_cast<std::size_t>(M * N)), y(direct.size());
  cpu::gemm_bf16(M, N, K, xv.data(), w.raw_data(), nullptr, direct.data());
  cpu::gemm(Isa::AVX512, M, N, K, xv.data(), cpu::GemmRhs{DType::BF16, w.raw_data(), true}, nullptr, y.data());
  EXPECT_TRUE(all_equal(y, direct));
  cpu::gemm(Isa::AVX2, M, N, K, xv.data(), cpu::GemmRhs{DType::BF16, w.raw_data(), true}, nullptr, y.data());
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) worst = std::max(worst, double(std::abs(y[i] - direct[i])));
  EXPECT_GT(worst, 0.0) << "AVX2 should not round x to bf16";
}

}  // namespace
}  // namespace ferry::ops
