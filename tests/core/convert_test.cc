// Exactness of dtype conversions: known edge values per format, exhaustive round trips, the generic rounding
// path against the F16C hardware conversion, and every ISA path against the scalar one.
#include "ferry/core/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ferry/core/cpu_features.h"

namespace ferry {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Convert, F16KnownValues) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);           // max finite
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);           // below the halfway point
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);           // tie rounds to even: inf
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: zero
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -26)), 0x0001);  // above the tie: rounds up
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xFC00);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
}

TEST(Convert, F16RoundTripIsExhaustivelyExact) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
}

TEST(Convert, GenericRoundingMatchesF16CHardware) {
  if (!cpu_supports(Isa::AVX2)) GTEST_SKIP() << "no F16C on this CPU";
  std::mt19937 rng(42);
  std::vector<float> src;
  for (int i = 0; i < 200000; ++i) {
    // Bias towards exponents near the f16 range so subnormals, overflow and ties are all hit.
    uint32_t e = 100 + rng() % 60, m = rng() & 0x7FFFFF, s = rng() & 1;
    src.push_back(from_bits(s << 31 | e << 23 | m));
  }
  for (float f : {65520.0f, 65519.99f, std::ldexp(1.0f, -25), std::ldexp(1.5f, -24)}) src.push_back(f);
  std::vector<uint16_t> hw(src.size());
  {
    ScopedIsa isa(Isa::AVX2);
    convert(src.data(), DType::F32, hw.data(), DType::F16, src.size());
  }
  for (std::size_t i = 0; i < src.size(); ++i) ASSERT_EQ(f32_to_f16(src[i]), hw[i]) << src[i];
}

TEST(Convert, BF16MatchesGenericRounding) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    float f = from_bits(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), encode_float(f, DType::BF16)) << f;
  }
  EXPECT_EQ(f32_to_bf16(from_bits(0x3F808000)), 0x3F80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(from_bits(0x3F818000)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(from_bits(0x7F7FFFFF)), 0x7F80);  // f32 max rounds to inf
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  EXPECT_EQ(f32_to_bf16(-NAN) & 0x8000, 0x8000);  // NaN keeps its sign
}

TEST(Convert, F64ToF16RoundsOnceNotTwice) {
  // 1 + 2^-11 + 2^-40 lies just above the f16 halfway point between 1 and 1 + 2^-10. Via f32 it would first
  // round to exactly the halfway point, then to even (1.0): double rounding. Correct rounding gives 1 + 2^-10.
  double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  uint16_t out = 0;
  convert(&x, DType::F64, &out, DType::F16, 1);
  EXPECT_EQ(out, 0x3C01);
  EXPECT_EQ(f32_to_f16(static_cast<float>(x)), 0x3C00);  // what double rounding would have given
}

TEST(Convert, F8E4M3FNEdges) {
  EXPECT_EQ(f32_to_f8_e4m3fn(448.0f), 0x7E);
  EXPECT_EQ(f32_to_f8_e4m3fn(464.0f), 0x7E);  // tie between 448 and (non-existent) 480: even
  EXPECT_EQ(f32_to_f8_e4m3fn(465.0f), 0x7F);  // overflow is NaN (no inf in this format), like PyTorch
  EXPECT_EQ(f32_to_f8_e4m3fn(INFINITY), 0x7F);
  EXPECT_EQ(f32_to_f8_e4m3fn(-INFINITY), 0xFF);
  EXPECT_EQ(f32_to_f8_e4m3fn(1000.0f, /*saturate=*/true), 0x7E);
  EXPECT_EQ(f32_to_f8_e4m3fn(-INFINITY, true), 0xFE);
  EXPECT_EQ(f32_to_f8_e4m3fn(std::ldexp(1.0f, -9)), 0x01);   // smallest subnormal
  EXPECT_EQ(f32_to_f8_e4m3fn(std::ldexp(1.0f, -10)), 0x00);  // tie to even
  EXPECT_EQ(f32_to_f8_e4m3fn(std::ldexp(1.0f, -6)), 0x08);   // smallest normal
  EXPECT_EQ(f32_to_f8_e4m3fn(NAN), 0x7F);
  EXPECT_TRUE(std::isnan(f8_e4m3fn_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(f8_e4m3fn_to_f32(0xFF)));
  EXPECT_EQ(f8_e4m3fn_to_f32(0x7E), 448.0f);
  EXPECT_EQ(f8_e4m3fn_to_f32(0x78), 256.0f);  // exponent field 15 is a normal binade here
  EXPECT_EQ(f8_e4m3fn_to_f32(0x01), std::ldexp(1.0f, -9));
}

TEST(Convert, F8E5M2Edges) {
  EXPECT_EQ(f32_to_f8_e5m2(57344.0f), 0x7B);
  EXPECT_EQ(f32_to_f8_e5m2(61439.0f), 0x7B);
  EXPECT_EQ(f32_to_f8_e5m2(61440.0f), 0x7C);  // tie to even: inf
  EXPECT_EQ(f32_to_f8_e5m2(INFINITY), 0x7C);
  EXPECT_EQ(f32_to_f8_e5m2(INFINITY, true), 0x7B);
  EXPECT_EQ(f32_to_f8_e5m2(1e6f, true), 0x7B);
  EXPECT_EQ(f32_to_f8_e5m2(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(f8_e5m2_to_f32(0x7C), INFINITY);
  EXPECT_TRUE(std::isnan(f8_e5m2_to_f32(0x7E)));
  EXPECT_TRUE(std::isnan(f8_e5m2_to_f32(0x7D)));
}

TEST(Convert, Fp8RoundTripAllCodes) {
  for (DType t : {DType::F8_E4M3FN, DType::F8_E5M2}) {
    for (uint32_t v = 0; v < 256; ++v) {
      double d = decode_float(v, t);
      if (std::isnan(d)) continue;
      ASSERT_EQ(encode_float(d, t), v) << dtype_name(t) << " " << v;
      // Through every wider float type and back, bit-exact.
      for (DType mid : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
        uint8_t in = static_cast<uint8_t>(v), out = 0;
        uint64_t tmp = 0;
        convert(&in, t, &tmp, mid, 1);
        convert(&tmp, mid, &out, t, 1);
        ASSERT_EQ(out, v) << dtype_name(t) << " via " << dtype_name(mid);
      }
    }
  }
}

TEST(Convert, FloatToIntegerTruncatesAndClamps) {
  std::vector<float> src{1.9f, -1.9f, 300.0f, -300.0f, NAN, 0.0f};
  std::vector<int8_t> i8(src.size());
  convert(src.data(), DType::F32, i8.data(), DType::I8, src.size());
  EXPECT_EQ(i8, (std::vector<int8_t>{1, -1, 127, -128, 0, 0}));
  std::vector<uint8_t> b(src.size());
  convert(src.data(), DType::F32, b.data(), DType::Bool, src.size());
  EXPECT_EQ(b, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
  std::vector<int64_t> big{int64_t(1) << 40, -(int64_t(1) << 40), 5};
  std::vector<int32_t> i32(3);
  convert(big.data(), DType::I64, i32.data(), DType::I32, 3);
  EXPECT_EQ(i32, (std::vector<int32_t>{INT32_MAX, INT32_MIN, 5}));
  std::vector<int64_t> back(3);
  convert(i32.data(), DType::I32, back.data(), DType::I64, 3);
  EXPECT_EQ(back[2], 5);
}

TEST(Convert, EveryIsaAndThreadedPathAgreesWithScalar) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0, 100);
  const std::size_t n = 300001;  // large enough for the thread pool, odd for tails
  std::vector<float> src(n);
  for (auto& v : src) v = nd(rng);
  for (DType t : {DType::F16, DType::BF16, DType::F8_E4M3FN, DType::F8_E5M2, DType::F64, DType::I32}) {
    std::vector<uint64_t> ref(n), got(n);
    std::vector<float> ref_back(n), got_back(n);
    {
      ScopedIsa scalar(Isa::Scalar);
      convert(src.data(), DType::F32, ref.data(), t, n);
      convert(ref.data(), t, ref_back.data(), DType::F32, n);
    }
    for (Isa isa : supported_isas()) {
      ScopedIsa s(isa);
      convert(src.data(), DType::F32, got.data(), t, n);
      convert(got.data(), t, got_back.data(), DType::F32, n);
      ASSERT_EQ(0, std::memcmp(ref.data(), got.data(), n * dtype_size(t))) << dtype_name(t) << " " << isa_name(isa);
      ASSERT_EQ(0, std::memcmp(ref_back.data(), got_back.data(), n * 4)) << dtype_name(t) << " " << isa_name(isa);
    }
  }
}

}  // namespace
}  // namespace ferry
