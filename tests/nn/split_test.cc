// nn/split.h: a fused q|k|v projection's output split per head (GPT-NeoX's and BLOOM's checkpoints) or as three
// blocks (llama.cpp's converter's order), and the shapes it refuses.
#include "ferry/nn/split.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "ferry/core/error.h"

namespace ferry::nn {
namespace {

using ::testing::ElementsAre;

// T = 2 rows of 3 · H · D = 3 · 2 · 2 = 12 columns holding their own column index (+ 100 on the second row).
Tensor numbered_qkv() {
  std::vector<float> v(24);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 12; ++c) v[static_cast<std::size_t>(r * 12 + c)] = static_cast<float>(100 * r + c);
  return Tensor::from_vector(v, {2, 12});
}

TEST(SplitFusedQkv, PerHeadIsHeadsThenQkvThenDims) {
  // Columns [H, 3, D]: head 0 = q 0 1, k 2 3, v 4 5; head 1 = q 6 7, k 8 9, v 10 11.
  const std::vector<Tensor> p = split_fused_qkv(numbered_qkv(), 2, 2, /*blocks=*/false);
  ASSERT_EQ(p.size(), 3u);
  for (const Tensor& t : p) EXPECT_EQ(t.shape(), (Shape{2, 2, 2}));
  EXPECT_THAT(p[0].to_vector<float>(), ElementsAre(0, 1, 6, 7, 100, 101, 106, 107));
  EXPECT_THAT(p[1].to_vector<float>(), ElementsAre(2, 3, 8, 9, 102, 103, 108, 109));
  EXPECT_THAT(p[2].to_vector<float>(), ElementsAre(4, 5, 10, 11, 104, 105, 110, 111));
}

TEST(SplitFusedQkv, BlocksAreQThenKThenV) {
  // Columns [3, H, D]: q 0..3, k 4..7, v 8..11.
  const std::vector<Tensor> p = split_fused_qkv(numbered_qkv(), 2, 2, /*blocks=*/true);
  EXPECT_THAT(p[0].to_vector<float>(), ElementsAre(0, 1, 2, 3, 100, 101, 102, 103));
  EXPECT_THAT(p[1].to_vector<float>(), ElementsAre(4, 5, 6, 7, 104, 105, 106, 107));
  EXPECT_THAT(p[2].to_vector<float>(), ElementsAre(8, 9, 10, 11, 108, 109, 110, 111));
}

TEST(SplitFusedQkv, OtherShapesAreErrors) {
  EXPECT_THROW(split_fused_qkv(numbered_qkv(), 2, 3, false), Error);                     // 18 columns expected
  EXPECT_THROW(split_fused_qkv(numbered_qkv().reshape({24}), 2, 2, false), Error);       // 1-D
  EXPECT_THROW(split_fused_qkv(numbered_qkv().reshape({2, 2, 6}), 2, 2, false), Error);  // 3-D
}

}  // namespace
}  // namespace ferry::nn
