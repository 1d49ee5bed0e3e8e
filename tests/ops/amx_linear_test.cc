// bf16 weights on AMX (ISA AMX): ops::linear rounds x to bf16 as the AVX-512 BF16 paths do and multiplies on the
// tiles, every M (linear_kernels.h, "AMX"). Checks: against a double loop on the rounded x, on shapes with tails in
// M, N and K (not multiples of 16, 16 and 32), with and without bias, x a strided view; each row alone equals its row
// in any batch bit for bit (batch invariance: M = 1 and M = 16 take the in-place 2 × 1 kernel, more rows the packed
// 2 × 2 one); the kernels called on a part of the rows (the threads' split) write only those; the AMX and AVX-512
// paths agree within summation noise and differ from an f32-x path; the routing (bf16 only; FERRY_ISA / ScopedIsa
// take AMX away). Skipped, saying so, on CPUs without AMX or where Linux refused the tile state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ferry/ops/linear.h"
#include "ops/bf16_test_util.h"
#include "ops/cpu/linear_kernels.h"
#include "ops/op_test_util.h"

#if FERRY_X86_KERNELS
namespace ferry::ops {
namespace {

using namespace ferry::ops::optest;

#define SKIP_WITHOUT_AMX()                                                                             \
  if (!cpu_supports(Isa::AMX))                                                                         \
  GTEST_SKIP() << "this CPU does not run AMX tiles"                                                    \
               << (amx_unavailable_reason().empty() ? std::string(" (no AMX-TILE/BF16/INT8 in cpuid)") \
                                                    : " (" + std::string(amx_unavailable_reason()) + ")")

struct Shape3 {
  int64_t M, N, K;
};

std::vector<float> rows_alone(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t M = x.size(0), N = w.size(0);
  std::vector<float> out(static_cast<std::size_t>(M * N));
  for (int64_t m = 0; m < M; ++m) {
    const auto one = linear(x.slice(m, m + 1), w, b).to_vector<float>();
    std::copy(one.begin(), one.end(), out.begin() + m * N);
  }
  return out;
}

TEST(AmxLinear, MatchesDoubleReferenceOnShapesWithTails) {
  SKIP_WITHOUT_AMX();
  ScopedIsa isa(Isa::AMX);
  const std::vector<Shape3> shapes{{1, 64, 64},   {1, 70, 33},    {3, 17, 5},    {16, 128, 96},
                                   {17, 33, 31},  {40, 100, 200}, {33, 64, 64},  {1, 200, 1000},
                                   {50, 301, 77}, {64, 64, 2048}, {129, 96, 40}, {33, 70, 1100}};
  uint32_t seed = 100;
  for (const auto& s : shapes)
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(testing::Message() << "M=" << s.M << " N=" << s.N << " K=" << s.K << " bias=" << with_bias);
      const Tensor x = random_tensor({s.M, s.K}, DType::F32, ++seed),
                   w = random_tensor({s.N, s.K}, DType::BF16, ++seed);
      const Tensor b = with_bias ? random_tensor({s.N}, DType::F32, ++seed) : Tensor();
      const auto bv = with_bias ? b.to_vector<float>() : std::vector<float>();
      const Bf16Ref ref = bf16_reference(x.to_vector<float>(), w.to_vector<float>(), with_bias ? &bv : nullptr, s.M,
                                         s.N, s.K);
      EXPECT_TRUE(within_summation_noise(linear(x, w, b).to_vector<float>(), ref.y, ref.mag));
    }
}

TEST(AmxLinear, EachRowAloneEqualsItsRowInAnyBatchBitForBit) {
  SKIP_WITHOUT_AMX();
  ScopedIsa isa(Isa::AMX);
  // N: a partial group of 64 and of 32 rows; K: 35 chunks of 32, the last a tail of 12.
  const int64_t N = 150, K = 1100;
  const Tensor w = random_tensor({N, K}, DType::BF16, 7), b = random_tensor({N}, DType::F32, 8);
  for (int64_t M : {2, 15, 16, 17, 32, 33, 100}) {
    SCOPED_TRACE(testing::Message() << "M=" << M);
    const Tensor x = random_tensor({M, K}, DType::F32, static_cast<uint32_t>(20 + M));
    EXPECT_TRUE(all_equal(linear(x, w, b).to_vector<float>(), rows_alone(x, w, b)));
  }
}

TEST(AmxLinear, MisalignedOperandsAndLeadingDimensions) {
  SKIP_WITHOUT_AMX();
  ScopedIsa isa(Isa::AMX);
  // x and w views that start an odd number of elements into their storage (neither 64- nor 4-byte aligned for w),
  // x with two leading dimensions.
  const int64_t N = 48, K = 81;
  const Tensor xbig = random_tensor({7, K}, DType::F32, 31), wbig = random_tensor({N + 1, K}, DType::BF16, 32);
  const Tensor x = xbig.slice(1, 7).reshape({2, 3, K}), w = wbig.slice(1, N + 1);
  const Tensor y = linear(x, w);
  ASSERT_EQ(y.shape(), (Shape{2, 3, N}));
  const Bf16Ref ref = bf16_reference(x.to_vector<float>(), w.to_vector<float>(), nullptr, 6, N, K);
  EXPECT_TRUE(within_summation_noise(y.to_vector<float>(), ref.y, ref.mag));
}

TEST(AmxLinear, KernelOnPartOfTheRowsWritesOnlyThose) {
  SKIP_WITHOUT_AMX();
  ScopedIsa isa(Isa::AMX);
  const int64_t N = 200, K = 70;
  const Tensor w = random_tensor({N, K}, DType::BF16, 41);
  for (int64_t M : {1, 40}) {
    SCOPED_TRACE(testing::Message() << "M=" << M);
    const Tensor x = random_tensor({M, K}, DType::F32, 42);
    const auto xv = x.to_vector<float>();
    std::vector<uint16_t> xb(xv.size());
    for (std::size_t i = 0; i < xv.size(); ++i) xb[i] = round_bf16_bits(xv[i]);
    const int64_t blocks = (M + 15) / 16, chunks = (K + 31) / 32;
    std::vector<uint16_t> xp(static_cast<std::size_t>(blocks * chunks * 512), 0xABCD);
    cpu::amx::pack_x(xb.data(), M, K, 0, blocks, xp.data());
    const int64_t n0 = 64, n1 = 160;  // whole groups of 32 rows
    std::vector<float> y(static_cast<std::size_t>(M * N), -123.0f);
    cpu::amx::linear_bf16(w.raw_data(), K, xp.data(), M, nullptr, y.data(), N, n0, n1);
    const Bf16Ref ref = bf16_reference(xv, w.to_vector<float>(), nullptr, M, N, K);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        const float got = y[m * N + n];
        if (n < n0 || n >= n1) {
          ASSERT_EQ(got, -123.0f) << "m " << m << " n " << n;
        } else {
          ASSERT_NEAR(got, ref.y[m * N + n], 2e-5 * ref.mag[m * N + n] + 1e-6) << "m " << m << " n " << n;
        }
      }
  }
}

TEST(AmxLinear, AgreesWithTheAvx512PathAndRoundsX) {
  SKIP_WITHOUT_AMX();
  const int64_t M = 37, N = 96, K = 512;
  const Tensor x = random_tensor({M, K}, DType::F32, 51), w = random_tensor({N, K}, DType::BF16, 52);
  std::vector<float> amx, avx512, f32_x;
  {
    ScopedIsa isa(Isa::AMX);
    amx = linear(x, w).to_vector<float>();
  }
  {
    ScopedIsa isa(Isa::AVX512);
    avx512 = linear(x, w).to_vector<float>();
  }
  const Bf16Ref ref = bf16_reference(x.to_vector<float>(), w.to_vector<float>(), nullptr, M, N, K);
  EXPECT_TRUE(within_summation_noise(amx, std::vector<double>(avx512.begin(), avx512.end()), ref.mag));
  // The same weights as f32 with x unrounded: bf16 rounding noise, which summation-noise tolerance does not absorb.
  {
    ScopedIsa isa(Isa::AMX);
    f32_x = linear(x, w.to(DType::F32)).to_vector<float>();
  }
  EXPECT_FALSE(within_summation_noise(amx, std::vector<double>(f32_x.begin(), f32_x.end()), ref.mag));
}

TEST(AmxLinear, RoutingBf16OnlyAndOnlyOnTheAmxIsa) {
  EXPECT_FALSE(cpu::use_amx(Isa::AVX512, DType::BF16));
  EXPECT_FALSE(cpu::use_amx(Isa::AMX, DType::F16));
  EXPECT_FALSE(cpu::use_amx(Isa::AMX, DType::F32));
  EXPECT_FALSE(cpu::use_amx(Isa::AMX, DType::Q8_0));
  EXPECT_TRUE(cpu::use_amx(Isa::AMX, DType::BF16));
  EXPECT_EQ(std::string(isa_name(Isa::AMX)), "amx");
  if (cpu_supports(Isa::AMX)) {
    EXPECT_EQ(supported_isas().back(), Isa::AMX);
  } else {
    EXPECT_THROW(set_cpu_isa(Isa::AMX), Error);
  }
}

}  // namespace
}  // namespace ferry::ops
#endif  // FERRY_X86_KERNELS
