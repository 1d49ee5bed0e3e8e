// RoPE inverse frequencies (nn/rotary.h) against transformers' formulas written out in double precision, and the
// RotaryEmbedding module's buffers.
#include "ferry/nn/rotary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "ferry/core/error.h"
#include "ferry/nn/module_tensors.h"

namespace ferry::nn {
namespace {

using ::testing::HasSubstr;

std::vector<double> default_inv_freq(int64_t dim, double theta) {
  std::vector<double> f;
  for (int64_t i = 0; i < dim; i += 2) f.push_back(1.0 / std::pow(theta, static_cast<double>(i) / dim));
  return f;
}

void expect_close(const Tensor& got, const std::vector<double>& want) {
  std::vector<float> g = got.to_vector<float>();
  ASSERT_EQ(g.size(), want.size());
  for (std::size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], 2e-6 * std::fabs(want[i])) << "i = " << i;
}

TEST(RopeInverseFrequencies, DefaultIsThetaPowers) {
  expect_close(rope_inverse_frequencies(16, RopeParameters{}), default_inv_freq(16, 10000.0));
  RopeParameters p;
  p.rope_theta = 500000.0;
  expect_close(rope_inverse_frequencies(128, p), default_inv_freq(128, 500000.0));
}

TEST(RopeInverseFrequencies, LinearDividesByFactor) {
  RopeParameters p;
  p.rope_type = "linear";
  p.factor = 4.0;
  std::vector<double> want = default_inv_freq(16, 10000.0);
  for (double& f : want) f /= 4.0;
  expect_close(rope_inverse_frequencies(16, p), want);
}

// transformers' _compute_llama3_parameters, in double.
TEST(RopeInverseFrequencies, Llama3ScalesLowAndSmoothsMiddleBand) {
  RopeParameters p;
  p.rope_type = "llama3";
  p.factor = 8.0;
  p.low_freq_factor = 1.0;
  p.high_freq_factor = 4.0;
  p.original_max_position_embeddings = 64;
  std::vector<double> want = default_inv_freq(16, 10000.0);
  int kept = 0, smoothed = 0, scaled = 0;
  for (double& f : want) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen < 64.0 / 4.0) {
      ++kept;
    } else if (wavelen > 64.0 / 1.0) {
      f /= 8.0;
      ++scaled;
    } else {
      const double smooth = (64.0 / wavelen - 1.0) / (4.0 - 1.0);
      f = (1 - smooth) * f / 8.0 + smooth * f;
      ++smoothed;
    }
  }
  ASSERT_GT(kept, 0);  // the case exercises all three bands
  ASSERT_GT(smoothed, 0);
  ASSERT_GT(scaled, 0);
  expect_close(rope_inverse_frequencies(16, p), want);
}

TEST(RopeInverseFrequencies, BadParametersAreErrors) {
  RopeParameters p;
  EXPECT_THROW(rope_inverse_frequencies(7, p), Error);
  EXPECT_THROW(rope_inverse_frequencies(0, p), Error);
  p.rope_theta = 0;
  EXPECT_THROW(rope_inverse_frequencies(8, p), Error);
  p = RopeParameters{};
  p.rope_type = "yarn";
  try {
    rope_inverse_frequencies(8, p);
    FAIL() << "yarn accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("\"yarn\" is not supported"));
  }
  p.rope_type = "llama3";
  p.factor = 8;
  p.low_freq_factor = 4;
  p.high_freq_factor = 1;
  EXPECT_THROW(rope_inverse_frequencies(8, p), Error);
}

TEST(RotaryEmbedding, HoldsNonPersistentBuffersLikeTransformers) {
  RotaryEmbedding llama("LlamaRotaryEmbedding", 16, RopeParameters{});
  EXPECT_EQ(llama.type_name(), "LlamaRotaryEmbedding");
  ASSERT_EQ(llama.own_buffers().size(), 2u);
  EXPECT_EQ(llama.own_buffers()[0].name, "inv_freq");
  EXPECT_EQ(llama.own_buffers()[1].name, "original_inv_freq");
  EXPECT_FALSE(llama.is_persistent_buffer("inv_freq"));
  EXPECT_TRUE(llama.state_dict().empty());  // never saved in checkpoints
  EXPECT_EQ(llama.inv_freq().shape(), (Shape{8}));
  EXPECT_TRUE(llama(Args{}).tensor().is_same(llama.inv_freq()));
  RotaryEmbedding gptj("GPTJRotaryEmbedding", 8, RopeParameters{}, false);
  EXPECT_EQ(gptj.own_buffers().size(), 1u);
}

}  // namespace
}  // namespace ferry::nn
