// Rotary embeddings: inverse frequencies as transformers computes them, both layouts and partial rotary dims
// against a double-precision rotation, every ISA, and errors.
#include "ferry/ops/rotary.h"

#include <gmock/gmock.h>

#include "ops/op_test_util.h"

namespace ferry::ops {
namespace {

using ::testing::HasSubstr;
using namespace ferry::ops::optest;

TEST(RopeInvFreq, IsTransformersF32Formula) {
  for (auto [R, theta] : {std::pair<int64_t, double>{128, 10000.0}, {64, 500000.0}, {32, 1e6}, {2, 10000.0}}) {
    auto inv = rope_inv_freq(R, theta).to_vector<float>();
    ASSERT_EQ(static_cast<int64_t>(inv.size()), R / 2);
    for (int64_t i = 0; i < R / 2; ++i) {
      // transformers: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all in f32
      const float e = static_cast<float>(2 * i) / static_cast<float>(R);
      EXPECT_EQ(inv[i], 1.0f / std::pow(static_cast<float>(theta), e));
      EXPECT_NEAR(inv[i], std::pow(theta, -2.0 * i / R), 1e-6 * std::pow(theta, -2.0 * i / R));
    }
  }
  EXPECT_THAT(error_of([] { rope_inv_freq(7, 10000.0); }), HasSubstr("even"));
  EXPECT_THAT(error_of([] { rope_inv_freq(0, 10000.0); }), HasSubstr("even and positive"));
  EXPECT_THAT(error_of([] { rope_inv_freq(8, -1.0); }), HasSubstr("theta"));
}

// x rotated in double from f32 angles (positions[t] · inv_freq[i] rounded to f32, as the op specifies).
std::vector<double> rotate_ref(const std::vector<float>& x, int64_t T, int64_t H, int64_t D,
                               const std::vector<int64_t>& pos, const std::vector<float>& inv, RopeLayout layout,
                               double scaling) {
  std::vector<double> y(x.begin(), x.end());
  const int64_t half = static_cast<int64_t>(inv.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<float>(pos[t]) * inv[i];
        const double c = std::cos(angle) * scaling, s = std::sin(angle) * scaling;
        const int64_t a = layout == RopeLayout::RotateHalf ? i : 2 * i;
        const int64_t b = layout == RopeLayout::RotateHalf ? i + half : 2 * i + 1;
        const double xa = x[(t * H + h) * D + a], xb = x[(t * H + h) * D + b];
        y[(t * H + h) * D + a] = xa * c - xb * s;
        y[(t * H + h) * D + b] = xb * c + xa * s;
      }
  return y;
}

TEST(ApplyRotary, BothLayoutsAndPartialDimsMatchReference) {
  struct Case {
    int64_t T, H, D, R;
  };
  for (RopeLayout layout : {RopeLayout::RotateHalf, RopeLayout::Interleaved})
    for (const Case& c : {Case{1, 1, 2, 2}, Case{3, 2, 8, 8}, Case{5, 3, 64, 64}, Case{2, 4, 128, 128},
                          Case{7, 2, 64, 16}, Case{4, 3, 80, 20}, Case{3, 1, 34, 34}, Case{2, 2, 96, 48}})
      for (double scaling : {1.0, 1.3}) {
        SCOPED_TRACE(::testing::Message() << (layout == RopeLayout::RotateHalf ? "rotate_half" : "interleaved")
                                          << " T=" << c.T << " H=" << c.H << " D=" << c.D << " R=" << c.R
                                          << " scaling=" << scaling);
        Tensor x0 = random_tensor({c.T, c.H, c.D}, DType::F32, 1, -2, 2);
        std::vector<int64_t> pos(c.T);
        for (int64_t t = 0; t < c.T; ++t) pos[t] = t * 37 + (t % 2 ? 4000 : 0);  // small and large angles
        Tensor positions = Tensor::from_vector(pos, {c.T});
        Tensor inv = rope_inv_freq(c.R, 10000.0);
        const auto want = rotate_ref(x0.to_vector<float>(), c.T, c.H, c.D, pos, inv.to_vector<float>(), layout, scaling);
        for_each_isa([&](Isa) {
          Tensor x = misaligned(x0);
          apply_rotary_(x, positions, inv, layout, static_cast<float>(scaling));
          // Dims past R are untouched bit for bit (want holds them as copied from x0).
          EXPECT_TRUE(all_close(x.to_vector<float>(), want, 2e-6, 2e-6));
        });
      }
}

TEST(ApplyRotary, PositionZeroIsIdentityAndErrorsNameShapes) {
  Tensor x0 = random_tensor({1, 2, 8}, DType::F32, 2);
  Tensor x = x0.clone();
  apply_rotary_(x, Tensor::zeros({1}, DType::I64), rope_inv_freq(8, 10000.0), RopeLayout::RotateHalf);
  EXPECT_EQ(x.to_vector<float>(), x0.to_vector<float>());

  Tensor inv = rope_inv_freq(8, 10000.0);
  std::string msg = error_of([&] { apply_rotary_(x, Tensor::zeros({2}, DType::I64), inv, RopeLayout::RotateHalf); });
  EXPECT_THAT(msg, HasSubstr("ops::apply_rotary_"));
  EXPECT_THAT(msg, HasSubstr("i64 [1]"));
  EXPECT_THAT(error_of([&] { apply_rotary_(x, Tensor::zeros({1}, DType::I32), inv, RopeLayout::RotateHalf); }),
              HasSubstr("must be i64"));
  EXPECT_THAT(error_of([&] { apply_rotary_(x, Tensor::zeros({1}, DType::I64), rope_inv_freq(16, 1e4), RopeLayout::RotateHalf); }),
              HasSubstr("rotary_dim"));
  Tensor flat = Tensor::zeros({2, 8}, DType::F32);
  EXPECT_THAT(error_of([&] { apply_rotary_(flat, Tensor::zeros({2}, DType::I64), inv, RopeLayout::RotateHalf); }),
              HasSubstr("[tokens, heads, head_dim]"));
}

}  // namespace
}  // namespace ferry::ops
