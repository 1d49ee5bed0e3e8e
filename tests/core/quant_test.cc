// ggml block formats: the type table, and dequantization bit-exact with llama.cpp's `gguf` Python package on
// random blocks of every supported type (tests/reference/gguf_oracle.py; skipped without the reference venv).
#include "ferry/core/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "ferry/core/convert.h"
#include "support/error_of.h"
#include "support/hf_folder.h"

namespace ferry {
namespace {

std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(GgmlTypes, TableMatchesGgml) {
  struct Want {
    uint32_t id;
    const char* name;
    int64_t block;
    std::size_t bytes;
  };
  for (Want w : {Want{0, "f32", 1, 4}, {1, "f16", 1, 2}, {2, "q4_0", 32, 18}, {3, "q4_1", 32, 20},
                 {6, "q5_0", 32, 22}, {7, "q5_1", 32, 24}, {8, "q8_0", 32, 34}, {12, "q4_K", 256, 144},
                 {13, "q5_K", 256, 176}, {14, "q6_K", 256, 210}, {30, "bf16", 1, 2}, {10, "q2_K", 256, 84}}) {
    auto t = ggml_type_info(w.id);
    ASSERT_TRUE(t.has_value()) << w.name;
    EXPECT_EQ(t->name, w.name);
    EXPECT_EQ(t->block_size, w.block);
    EXPECT_EQ(t->block_bytes, w.bytes);
  }
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 1000u}) EXPECT_FALSE(ggml_type_info(removed).has_value()) << removed;
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_K, 512), 288u);
  EXPECT_FALSE(ggml_row_bytes(GgmlType::Q4_K, 100).has_value());
  EXPECT_FALSE(ggml_row_bytes(GgmlType::Q8_0, UINT64_MAX / 32 * 32).has_value());  // 2^59 blocks × 34 bytes overflow
}

TEST(Dequantize, HandMadeBlocks) {
  // Q8_0: d = 0.5, q = -3, 7, ...
  std::vector<uint8_t> b(34, 0);
  const uint16_t half = f32_to_f16(0.5f);
  std::memcpy(b.data(), &half, 2);
  b[2] = static_cast<uint8_t>(int8_t{-3});
  b[3] = 7;
  std::vector<float> y(32);
  dequantize(GgmlType::Q8_0, b.data(), y.data(), 32);
  EXPECT_EQ(y[0], -1.5f);
  EXPECT_EQ(y[1], 3.5f);
  EXPECT_EQ(y[2], 0.0f);
  // Q4_0: d = 2, nibbles 0x1F -> low 15 (element 0), high 1 (element 16): 2·(15−8), 2·(1−8)
  std::vector<uint8_t> q(18, 0x88);
  const uint16_t two = f32_to_f16(2.0f);
  std::memcpy(q.data(), &two, 2);
  q[2] = 0x1F;
  dequantize(GgmlType::Q4_0, q.data(), y.data(), 32);
  EXPECT_EQ(y[0], 14.0f);
  EXPECT_EQ(y[16], -14.0f);
  EXPECT_EQ(y[1], 0.0f);
}

TEST(Dequantize, RefusesPartialBlocksAndUnsupportedTypes) {
  std::vector<uint8_t> b(256);
  std::vector<float> y(64);
  EXPECT_NE(test::error_of([&] { dequantize(GgmlType::Q8_0, b.data(), y.data(), 33); }).find("whole number"),
            std::string::npos);
  const std::string msg = test::error_of([&] { dequantize(GgmlType::IQ2_XXS, b.data(), y.data(), 0); });
  EXPECT_NE(msg.find("iq2_xxs"), std::string::npos) << msg;
}

TEST(Dequantize, BitExactWithTheGgufPackage) {
  auto python = test::reference_python(FERRY_SOURCE_DIR);
  if (!python) GTEST_SKIP() << "no reference venv (scripts/venv)";
  test::TempDir dir;
  ASSERT_EQ(test::run_reference_script(*python, "gguf_oracle.py", {"blocks", dir.path().string()},
                                       dir.path() / "oracle.log"),
            "");
  struct Case {
    const char* name;
    GgmlType type;
  };
  for (Case c : {Case{"q4_0", GgmlType::Q4_0}, {"q4_1", GgmlType::Q4_1}, {"q5_0", GgmlType::Q5_0},
                 {"q5_1", GgmlType::Q5_1}, {"q8_0", GgmlType::Q8_0}, {"q4_k", GgmlType::Q4_K},
                 {"q5_k", GgmlType::Q5_K}, {"q6_k", GgmlType::Q6_K}}) {
    const auto blocks = read_bytes(dir.path() / (std::string(c.name) + ".blocks"));
    const auto want_bytes = read_bytes(dir.path() / (std::string(c.name) + ".f32"));
    const GgmlTypeInfo t = ggml_type_info(c.type);
    ASSERT_EQ(blocks.size() % t.block_bytes, 0u) << c.name;
    const int64_t n = static_cast<int64_t>(blocks.size() / t.block_bytes) * t.block_size;
    ASSERT_EQ(want_bytes.size(), static_cast<std::size_t>(n) * 4) << c.name;
    std::vector<float> got(static_cast<std::size_t>(n));
    dequantize(c.type, blocks.data(), got.data(), n);
    std::size_t mismatches = 0, first = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      float want;
      std::memcpy(&want, want_bytes.data() + 4 * i, 4);
      uint32_t a, b;
      std::memcpy(&a, &want, 4);
      std::memcpy(&b, &got[i], 4);
      if (a != b && !(std::isnan(want) && std::isnan(got[i])) && mismatches++ == 0) first = i;
    }
    EXPECT_EQ(mismatches, 0u) << c.name << ": first at element " << first;
  }
}

}  // namespace
}  // namespace ferry
