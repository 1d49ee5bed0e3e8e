// bf16 weights on AVX-512 BF16 CPUs: every linear path rounds x to bf16 the same way, and the GEMV and the small-batch
// kernel (which ops::linear takes for every M >= 2 there) compute each output with the same instructions, so a row's
// result does not depend on the rows that share its call. Checks: ops::linear of M rows against linear of each row
// alone, bit for bit (and within f32 summation noise of a double loop on the rounded x; a path that kept x in f32
// would differ by bf16 rounding noise, which is far larger at these sizes: the test checks that it is); the GEMV
// kernel against the small-batch kernel bit for bit; both kernels against a double loop on rounded x (K tails, odd
// K, both GEMV traversals, misaligned operands, bias, partial row ranges); and round_to_bf16 bit for bit against the
// scalar model (±0, denormals, inf, NaN, ties); the routing (only AVX512 with AVX512_BF16 and bf16 weights).
// Skipped on CPUs without AVX512_BF16.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ferry/ops/linear.h"
#include "ops/bf16_test_util.h"
#include "ops/cpu/linear_kernels.h"
#include "ops/op_test_util.h"

// The kernels under test exist on x86-64 only (FERRY_X86_KERNELS); elsewhere this file has no tests.
#if FERRY_X86_KERNELS
namespace ferry::ops {
namespace {

using namespace ferry::ops::optest;

::testing::AssertionResult matches(const std::vector<float>& got, const Bf16Ref& ref) {
  return within_summation_noise(got, ref.y, ref.mag);
}

// x rounded to bf16 by the library (round_to_bf16), as bits, starting `offset` elements into the returned buffer.
std::vector<uint16_t> rounded_bits(const std::vector<float>& x, std::size_t offset = 0) {
  std::vector<uint16_t> b(x.size() + offset, 0xABCD);
  cpu::avx512bf16::round_to_bf16(x.data(), static_cast<int64_t>(x.size()), b.data() + offset);
  return b;
}

// Rows xb[M, K] laid out for avx512bf16::small_batch by the library (pack_small_batch_x), starting `offset` elements
// into the returned buffer; what the packing does not write keeps a marker that is not zero.
std::vector<uint16_t> packed(const uint16_t* xb, int64_t M, int64_t K, std::size_t offset = 0) {
  std::vector<uint16_t> p(static_cast<std::size_t>(M * cpu::small_batch_padded_k(K)) + offset, 0xABCD);
  cpu::pack_small_batch_x(xb, M, K, 0, cpu::small_batch_tiles(M), p.data() + offset);
  return p;
}

// ---- (a) the paths agree --------------------------------------------------------------------------------------

TEST(Bf16Linear, EveryRowCountMatchesEachRowAloneBitForBit) {
  SKIP_WITHOUT_AVX512_BF16();
  ScopedIsa isa(Isa::AVX512);
  // K = 300: a K tail of 12 for the 32-wide kernels; N = 70: partial row blocks of 4 and 8. M = 1 (GEMV), 2 and more
  // (small batch: 7 = 4 + 3 rows per tile, 40, 64, 65, 300 rows).
  const int64_t N = 70, K = 300;
  const Tensor w = random_tensor({N, K}, DType::BF16, 51), b = random_tensor({N}, DType::F32, 52);
  const auto wv = w.to_vector<float>(), bv = b.to_vector<float>();
  for (int64_t M : {1, 2, 7, 40, 64, 65, 300}) {
    SCOPED_TRACE(testing::Message() << "M=" << M);
    const Tensor x = random_tensor({M, K}, DType::F32, static_cast<uint32_t>(60 + M));
    const auto xv = x.to_vector<float>();
    const auto y = linear(x, w, b).to_vector<float>();
    const Bf16Ref ref = bf16_reference(xv, wv, &bv, M, N, K);
    EXPECT_TRUE(matches(y, ref));
    std::vector<float> alone(static_cast<std::size_t>(M * N));
    for (int64_t m = 0; m < M; ++m) {
      const auto one = linear(x.slice(m, m + 1), w, b).to_vector<float>();
      std::copy(one.begin(), one.end(), alone.begin() + m * N);
    }
    // Row by row against the GEMV: the same bits where ops::linear takes the small-batch kernel (every M as
    // kSmallBatchMaxRowsBf16 stands), else (the GEMM) f32 summation noise.
    if (M == 1 || cpu::use_small_batch(Isa::AVX512, DType::BF16, M)) {
      EXPECT_TRUE(all_equal(y, alone));
    } else {
      EXPECT_TRUE(within_summation_noise(y, std::vector<double>(alone.begin(), alone.end()), ref.mag));
    }
    // Summation noise cannot absorb bf16 rounding: the GEMV against a sum on x in f32 fails it, so a path that
    // forgot to round would fail the comparisons above.
    std::vector<double> unrounded(static_cast<std::size_t>(M * N));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = bv[n];
        for (int64_t k = 0; k < K; ++k) s += double(xv[m * K + k]) * double(wv[n * K + k]);
        unrounded[m * N + n] = s;
      }
    EXPECT_FALSE(within_summation_noise(alone, unrounded, ref.mag));
  }
}

// The two kernels directly: each output of the small-batch kernel, whatever M and its row's place in a tile, equals
// the GEMV of that row, for K with every tail of the 32-element step, both GEMV traversals (K above 8192: eight rows
// at a time) and N tails of the 4- and 8-row blocks.
TEST(Bf16Gemv, EqualsTheSmallBatchKernelBitForBit) {
  SKIP_WITHOUT_AVX512_BF16();
  const int64_t N = 21;
  // M = 200 at K >= 2048: x larger than one L2 group of tiles, so the tiles run in several groups.
  for (int64_t K : {1, 31, 32, 33, 300, 2048, 8193})
    for (int64_t M : {1, 5, 13, 200}) {
      if (M == 200 && K < 2048) continue;
      SCOPED_TRACE(testing::Message() << "M=" << M << " K=" << K);
      const Tensor w = random_tensor({N, K}, DType::BF16, static_cast<uint32_t>(K + 1));
      const auto xb = rounded_bits(random_floats(M * K, static_cast<uint32_t>(M + K)));
      const auto bv = random_floats(N, 7);
      std::vector<float> batch(static_cast<std::size_t>(M * N)), rows(batch.size());
      cpu::avx512bf16::small_batch(w.raw_data(), K, packed(xb.data(), M, K).data(), M, bv.data(), batch.data(), N, 0,
                                   N);
      for (int64_t m = 0; m < M; ++m)
        cpu::avx512bf16::gemv(w.raw_data(), K, xb.data() + m * K, bv.data(), rows.data() + m * N, 0, N);
      EXPECT_TRUE(all_equal(batch, rows));
    }
}

// The routing of those row counts: every bf16 path rounds on AVX512 with AVX512_BF16, none on AVX2.
TEST(Bf16Linear, Avx2KeepsXInF32) {
  SKIP_WITHOUT_AVX512_BF16();
  const int64_t N = 20, K = 100;
  const Tensor w = random_tensor({N, K}, DType::BF16, 53);
  const auto wv = w.to_vector<float>();
  for (int64_t M : {1, 5, 100}) {
    SCOPED_TRACE(testing::Message() << "M=" << M);
    const Tensor x = random_tensor({M, K}, DType::F32, 54);
    const Bf16Ref ref = bf16_reference(x.to_vector<float>(), wv, nullptr, M, N, K);
    ScopedIsa isa(Isa::AVX2);
    EXPECT_FALSE(cpu::use_bf16_kernels(Isa::AVX2, DType::BF16));
    EXPECT_FALSE(within_summation_noise(linear(x, w).to_vector<float>(), ref.y, ref.mag));
  }
}

TEST(Bf16Linear, RoutingNeedsAvx512Bf16AndBf16Weights) {
  EXPECT_FALSE(cpu::use_bf16_kernels(Isa::AVX2, DType::BF16));
  EXPECT_FALSE(cpu::use_bf16_kernels(Isa::Scalar, DType::BF16));
  EXPECT_FALSE(cpu::use_bf16_kernels(Isa::AVX512, DType::F16));
  EXPECT_FALSE(cpu::use_bf16_kernels(Isa::AVX512, DType::F32));
  EXPECT_EQ(cpu::use_bf16_kernels(Isa::AVX512, DType::BF16), have_avx512_bf16());
}

// ---- (b) the kernels on their own ------------------------------------------------------------------------------

TEST(Bf16Gemv, MatchesDoubleOnRoundedXForEveryTail) {
  SKIP_WITHOUT_AVX512_BF16();
  // K: below, at and past 32 and 128 (the one-row step), odd; 8193 and 8231 take the eight-row traversal.
  const int64_t depths[] = {1, 2, 31, 32, 33, 63, 127, 128, 129, 300, 2049, 8192, 8193, 8231};
  for (int64_t K : depths)
    for (int64_t N : {1, 9, 37})
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(testing::Message() << "N=" << N << " K=" << K << (with_bias ? " bias" : ""));
        const Tensor w = misaligned(random_tensor({N, K}, DType::BF16, static_cast<uint32_t>(K + N)));
        const auto xv = random_floats(K, static_cast<uint32_t>(7 * K + 1));
        const auto bv = random_floats(N, 5);
        const auto xb = rounded_bits(xv, 1);  // x one element (2 bytes) past alignment
        const Bf16Ref ref = bf16_reference(xv, w.to_vector<float>(), with_bias ? &bv : nullptr, 1, N, K);
        // Rows [1, N) only: y[0] stays as it was.
        std::vector<float> y(static_cast<std::size_t>(N + 1), -7.0f);
        cpu::avx512bf16::gemv(w.raw_data(), K, xb.data() + 1, with_bias ? bv.data() : nullptr, y.data() + 1, 1, N);
        EXPECT_EQ(y[1], -7.0f);
        std::vector<float> got(y.begin() + 2, y.end());
        const Bf16Ref tail{std::vector<double>(ref.y.begin() + 1, ref.y.end()),
                           std::vector<double>(ref.mag.begin() + 1, ref.mag.end())};
        EXPECT_TRUE(matches(got, tail));
        // The whole range through the driver.
        std::vector<float> all(static_cast<std::size_t>(N));
        cpu::gemv(Isa::AVX512, DType::BF16, w.raw_data(), N, K, xv.data(), with_bias ? bv.data() : nullptr,
                  all.data());
        EXPECT_TRUE(matches(all, ref));
      }
}

TEST(Bf16SmallBatch, MatchesDoubleOnRoundedXForEveryTail) {
  SKIP_WITHOUT_AVX512_BF16();
  const int64_t N = 11;
  for (int64_t K : {1, 17, 32, 33, 531})
    for (int64_t M : {1, 2, 5, 6, 7, 13}) {
      SCOPED_TRACE(testing::Message() << "M=" << M << " K=" << K);
      const Tensor w = misaligned(random_tensor({N, K}, DType::BF16, static_cast<uint32_t>(K)));
      const auto xv = random_floats(M * K, static_cast<uint32_t>(M * K + 3));
      const auto bv = random_floats(N, 6);
      const auto xb = rounded_bits(xv, 1);
      const Bf16Ref ref = bf16_reference(xv, w.to_vector<float>(), &bv, M, N, K);
      std::vector<float> y(static_cast<std::size_t>(M * N), -7.0f);
      cpu::avx512bf16::small_batch(w.raw_data(), K, packed(xb.data() + 1, M, K, 1).data() + 1, M, bv.data(), y.data(),
                                   N, 0, N);
      EXPECT_TRUE(matches(y, ref));
    }
}

// ---- (c) the rounding ------------------------------------------------------------------------------------------

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(RoundToBf16, BitIdenticalToTheScalarModel) {
  SKIP_WITHOUT_AVX512_BF16();
  std::vector<float> v;
  for (uint32_t u : {0x00000000u, 0x80000000u,                          // ±0
                     0x00000001u, 0x80000001u, 0x007FFFFFu, 0x807FFFFFu,  // denormals (flushed to ±0)
                     0x00400000u, 0x00008000u,                          // denormals at a bf16 rounding tie
                     0x00800000u, 0x80800000u, 0x0080FFFFu, 0x00808000u,  // smallest normals, round up, tie
                     0x7F800000u, 0xFF800000u,                          // ±inf
                     0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F7F7FFFu,               // ±FLT_MAX (→ ±inf), just below
                     0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FBFFFFFu, 0xFFC12345u, 0x7F80FFFFu,  // NaNs
                     0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F80FFFFu, 0xBF808000u, 0xBF818000u})  // ties
    v.push_back(from_bits(u));
  std::mt19937 rng(123);
  for (int i = 0; i < 4000; ++i) v.push_back(from_bits(static_cast<uint32_t>(rng())));  // every class of bits
  for (int64_t n : {int64_t(v.size()), int64_t(29), int64_t(33), int64_t(1)}) {  // tails of the 32-wide loop
    SCOPED_TRACE(testing::Message() << "n=" << n);
    std::vector<uint16_t> got(static_cast<std::size_t>(n) + 1, 0x1234);
    cpu::avx512bf16::round_to_bf16(v.data(), n, got.data());
    EXPECT_EQ(got[n], 0x1234) << "wrote past n";
    int bad_model = 0;
    for (int64_t k = 0; k < n; ++k) {
      if (got[k] != round_bf16_bits(v[k]) && ++bad_model <= 5) {
        ADD_FAILURE() << "element " << k << " (bits " << std::hex << std::bit_cast<uint32_t>(v[k]) << "): got "
                      << got[k] << ", model " << round_bf16_bits(v[k]);
      }
    }
  }
  // The ties: nearest-even.
  EXPECT_EQ(round_bf16(1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(round_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
  EXPECT_EQ(round_bf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
  EXPECT_TRUE(std::isnan(round_bf16(from_bits(0x7F800001u))));  // a signalling NaN whose payload truncates to 0
}

}  // namespace
}  // namespace ferry::ops

#endif  // FERRY_X86_KERNELS
