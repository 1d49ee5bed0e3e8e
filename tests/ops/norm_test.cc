// rms_norm, layer_norm, batch_norm and softmax: every ISA against double-precision formulas over odd row
// lengths, parameters in other float dtypes, numerically hard rows, and errors.
#include "ferry/ops/norm.h"

#include <gmock/gmock.h>

#include "ops/op_test_util.h"

namespace ferry::ops {
namespace {

using ::testing::HasSubstr;
using namespace ferry::ops::optest;

std::vector<double> rms_ref(const std::vector<float>& x, const std::vector<float>& w, int64_t D, double eps) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / D; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < D; ++i) ss += double(x[r * D + i]) * x[r * D + i];
    const double inv = 1 / std::sqrt(ss / D + eps);
    for (int64_t i = 0; i < D; ++i) y[r * D + i] = x[r * D + i] * inv * (w.empty() ? 1.0 : w[i]);
  }
  return y;
}

std::vector<double> layer_ref(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                              int64_t D, double eps) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / D; ++r) {
    double s = 0, v = 0;
    for (int64_t i = 0; i < D; ++i) s += x[r * D + i];
    const double mean = s / D;
    for (int64_t i = 0; i < D; ++i) v += (x[r * D + i] - mean) * (x[r * D + i] - mean);
    const double inv = 1 / std::sqrt(v / D + eps);
    for (int64_t i = 0; i < D; ++i)
      y[r * D + i] = (x[r * D + i] - mean) * inv * (w.empty() ? 1.0 : w[i]) + (b.empty() ? 0.0 : b[i]);
  }
  return y;
}

std::vector<double> softmax_ref(const std::vector<float>& x, int64_t D) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / D; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < D; ++i) m = std::max<double>(m, x[r * D + i]);
    for (int64_t i = 0; i < D; ++i) s += std::exp(x[r * D + i] - m);
    for (int64_t i = 0; i < D; ++i) y[r * D + i] = std::exp(x[r * D + i] - m) / s;
  }
  return y;
}

TEST(RmsNorm, EveryIsaMatchesReference) {
  for (int64_t D : kOddSizes)
    for (DType wt : {DType::F32, DType::BF16, DType::F16}) {
      SCOPED_TRACE(::testing::Message() << "D=" << D << " weight " << dtype_name(wt));
      Tensor x = misaligned(random_tensor({3, D}, DType::F32, 1, -3, 3));
      Tensor w = random_tensor({D}, wt, 2, 0.5, 1.5);
      const auto want = rms_ref(x.to_vector<float>(), w.to_vector<float>(), D, 1e-6);
      for_each_isa([&](Isa) { EXPECT_TRUE(all_close(rms_norm(x, w, 1e-6f).to_vector<float>(), want, 3e-6, 1e-7)); });
    }
  Tensor x = random_tensor({2, 5}, DType::F32, 3);
  const auto want = rms_ref(x.to_vector<float>(), {}, 5, 1e-5);
  for_each_isa([&](Isa) { EXPECT_TRUE(all_close(rms_norm(x, {}, 1e-5f).to_vector<float>(), want, 3e-6, 1e-7)); });
}

TEST(RmsNorm, ZeroRowGivesZerosAndErrorsNameShapes) {
  Tensor x = Tensor::zeros({1, 9}, DType::F32), w = Tensor::full({9}, 1.0, DType::F32);
  for_each_isa([&](Isa) { EXPECT_EQ(rms_norm(x, w, 1e-6f).to_vector<float>(), std::vector<float>(9, 0.0f)); });
  std::string msg = error_of([&] { rms_norm(x, Tensor::zeros({8}, DType::F32), 1e-6f); });
  EXPECT_THAT(msg, HasSubstr("ops::rms_norm"));
  EXPECT_THAT(msg, HasSubstr("weight f32 [8]"));
  EXPECT_THAT(msg, HasSubstr("[9]"));
  EXPECT_THAT(error_of([&] { rms_norm(x, Tensor::zeros({9}, DType::I32), 1e-6f); }), HasSubstr("floating-point"));
}

TEST(LayerNorm, EveryIsaMatchesReference) {
  for (int64_t D : kOddSizes)
    for (int variant = 0; variant < 3; ++variant) {  // weight+bias, weight only, neither
      SCOPED_TRACE(::testing::Message() << "D=" << D << " variant " << variant);
      // An offset mean (+10) makes a one-pass variance formula lose digits; the two-pass one must not.
      Tensor x = misaligned(random_tensor({4, D}, DType::F32, 4, 9, 11));
      Tensor w = variant < 2 ? random_tensor({D}, DType::F16, 5, 0.5, 1.5) : Tensor();
      Tensor b = variant < 1 ? random_tensor({D}, DType::F32, 6) : Tensor();
      const auto want = layer_ref(x.to_vector<float>(), w.defined() ? w.to_vector<float>() : std::vector<float>{},
                                  b.defined() ? b.to_vector<float>() : std::vector<float>{}, D, 1e-5);
      for_each_isa([&](Isa) {
        EXPECT_TRUE(all_close(layer_norm(x, w, b, 1e-5f).to_vector<float>(), want, 2e-5, 2e-5));
      });
    }
  EXPECT_THAT(error_of([] { layer_norm(Tensor::zeros({2, 4}, DType::F32), {}, Tensor::zeros({3}, DType::F32), 1e-5f); }),
              HasSubstr("bias"));
}

TEST(Softmax, EveryIsaMatchesReferenceAndRowsSumToOne) {
  for (int64_t D : kOddSizes) {
    SCOPED_TRACE(D);
    Tensor x = misaligned(random_tensor({3, D}, DType::F32, 7, -30, 30));
    const auto want = softmax_ref(x.to_vector<float>(), D);
    for_each_isa([&](Isa) {
      auto y = softmax(x).to_vector<float>();
      EXPECT_TRUE(all_close(y, want, 1e-5, 1e-9));
      double s = 0;
      for (int64_t i = 0; i < D; ++i) s += y[i];
      EXPECT_NEAR(s, 1.0, 1e-5);
    });
  }
}

TEST(Softmax, IsStableForLargeAndMaskedValues) {
  std::vector<float> v = {1000.0f, 999.0f, -INFINITY, 1000.0f, -1e30f, 998.0f, -INFINITY, 0.0f, 1000.0f};
  Tensor x = Tensor::from_vector(v, {1, 9});
  const auto want = softmax_ref(v, 9);
  for_each_isa([&](Isa) {
    auto y = softmax(x).to_vector<float>();
    EXPECT_TRUE(all_close(y, want, 1e-5, 1e-12));
    EXPECT_EQ(y[2], 0.0f);  // a masked (−inf) position gets exactly zero
  });
  // A fully masked row has no distribution: NaN, as in PyTorch.
  Tensor masked = Tensor::full({1, 10}, -INFINITY, DType::F32);
  for_each_isa([&](Isa) {
    for (float y : softmax(masked).to_vector<float>()) EXPECT_TRUE(std::isnan(y));
  });
}

TEST(BatchNorm, MatchesTorchEvalFormulaForEveryLayout) {
  const int64_t C = 4;
  Tensor mean = random_tensor({C}, DType::F32, 1), var = random_tensor({C}, DType::F32, 2, 0.5, 2);
  Tensor w = random_tensor({C}, DType::BF16, 3), b = random_tensor({C}, DType::F32, 4);
  auto mv = mean.to_vector<float>(), vv = var.to_vector<float>(), wv = w.to_vector<float>(), bv = b.to_vector<float>();
  for (const Shape& shape : {Shape{C}, Shape{3, C}, Shape{2, C, 5}}) {
    SCOPED_TRACE(shape_str(shape));
    Tensor x = random_tensor(shape, DType::F32, 5, -3, 3);
    auto xv = x.to_vector<float>();
    const int64_t L = shape.size() == 3 ? shape[2] : 1;
    std::vector<double> want(xv.size());
    for (std::size_t i = 0; i < xv.size(); ++i) {
      const int64_t c = (static_cast<int64_t>(i) / L) % C;
      want[i] = (xv[i] - mv[c]) / std::sqrt(double(vv[c]) + 1e-5) * wv[c] + bv[c];
    }
    EXPECT_TRUE(all_close(batch_norm(x, mean, var, w, b, 1e-5f).to_vector<float>(), want, 1e-5, 1e-6));
  }
  Tensor x = random_tensor({2, C}, DType::F32, 6);
  auto xv = x.to_vector<float>();
  std::vector<double> plain(xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) plain[i] = (xv[i] - mv[i % C]) / std::sqrt(double(vv[i % C]) + 1e-5);
  EXPECT_TRUE(all_close(batch_norm(x, mean, var, {}, {}, 1e-5f).to_vector<float>(), plain, 1e-5, 1e-6));
  EXPECT_THAT(error_of([&] { batch_norm(x, {}, var, w, b, 1e-5f); }), HasSubstr("running_mean"));
  EXPECT_THAT(error_of([&] { batch_norm(Tensor::zeros({2, 5}, DType::F32), mean, var, w, b, 1e-5f); }),
              HasSubstr("[4]"));
  EXPECT_THAT(error_of([&] { batch_norm(Tensor::zeros({1, 4, 1, 1}, DType::F32), mean, var, w, b, 1e-5f); }),
              HasSubstr("[N, C, L]"));
}

}  // namespace
}  // namespace ferry::ops
