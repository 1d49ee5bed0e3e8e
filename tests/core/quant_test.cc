// ggml block formats: the type table, dequantization bit-exact with llama.cpp's `gguf` Python package on random
// blocks of every supported type, quantization bit-exact with it for the 32-element types, ferry's K-quant
// quantizer's error, and quantized DTypes in tensors (tests/reference/gguf_oracle.py; the oracle cases skip
// without the reference venv).
#include "ferry/core/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include <random>

#include "ferry/core/convert.h"
#include "ferry/core/tensor.h"
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

TEST(Quantize, BitExactWithTheGgufPackage) {
  auto python = test::reference_python(FERRY_SOURCE_DIR);
  if (!python) GTEST_SKIP() << "no reference venv (scripts/venv)";
  test::TempDir dir;
  ASSERT_EQ(test::run_reference_script(*python, "gguf_oracle.py", {"quantize", dir.path().string()},
                                       dir.path() / "oracle.log"),
            "");
  const auto in = read_bytes(dir.path() / "quantize.f32");
  std::vector<float> x(in.size() / 4);
  std::memcpy(x.data(), in.data(), in.size());
  struct Case {
    const char* name;
    GgmlType type;
  };
  for (Case c : {Case{"q8_0", GgmlType::Q8_0}, {"q4_0", GgmlType::Q4_0}, {"q4_1", GgmlType::Q4_1},
                 {"q5_0", GgmlType::Q5_0}, {"q5_1", GgmlType::Q5_1}}) {
    const auto want = read_bytes(dir.path() / (std::string(c.name) + ".quantized"));
    std::vector<uint8_t> got(*ggml_row_bytes(c.type, x.size()));
    quantize(c.type, x.data(), got.data(), static_cast<int64_t>(x.size()));
    ASSERT_EQ(got.size(), want.size()) << c.name;
    std::size_t first = got.size();
    for (std::size_t i = 0; i < got.size() && first == got.size(); ++i)
      if (got[i] != want[i]) first = i;
    EXPECT_EQ(first, got.size()) << c.name << ": first differing byte " << first << " (block "
                                 << first / ggml_type_info(c.type).block_bytes << ")";
  }
}

std::vector<float> normal_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// Round-trip error of every quantizer on normal weights, relative to the values' RMS: what each format's bits
// allow (measured: q8_0 0.0053, q6_k 0.018, q5_k 0.037, q5_1 0.038, q5_0 0.042, q4_k 0.073, q4_1 0.078,
// q4_0 0.086 — about a uniform quantizer's step/√12); the bounds leave ~20% headroom but catch a wrong layout or
// scale.
TEST(Quantize, RoundTripErrorPerType) {
  const int64_t n = 256 * 64;
  const auto x = normal_values(n, 7);
  struct Case {
    GgmlType type;
    double max_rel_rms;
  };
  for (Case c : {Case{GgmlType::Q8_0, 0.0065}, {GgmlType::Q6_K, 0.022}, {GgmlType::Q5_K, 0.045},
                 {GgmlType::Q5_0, 0.05}, {GgmlType::Q5_1, 0.045}, {GgmlType::Q4_K, 0.09}, {GgmlType::Q4_0, 0.1},
                 {GgmlType::Q4_1, 0.095}}) {
    std::vector<uint8_t> q(*ggml_row_bytes(c.type, n));
    quantize(c.type, x.data(), q.data(), n);
    std::vector<float> back(static_cast<std::size_t>(n));
    dequantize(c.type, q.data(), back.data(), n);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (back[i] - x[i]) * double(back[i] - x[i]);
      ref += x[i] * double(x[i]);
    }
    const double rel = std::sqrt(err / ref);
    EXPECT_LT(rel, c.max_rel_rms) << ggml_type_info(c.type).name;
    EXPECT_GT(rel, 0.0) << ggml_type_info(c.type).name;
  }
}

TEST(Quantize, KQuantsKeepZerosAndExtremes) {
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    std::vector<float> x(256, 0.0f);
    std::vector<uint8_t> q(*ggml_row_bytes(t, 256));
    std::vector<float> back(256);
    quantize(t, x.data(), q.data(), 256);  // all zero: scales 0, values 0
    dequantize(t, q.data(), back.data(), 256);
    for (float v : back) ASSERT_EQ(v, 0.0f) << ggml_type_info(t).name;
    for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i % 16) - 7.5f;
    x[100] = 40.0f;  // one outlier: its sub-block gets the largest scale
    quantize(t, x.data(), q.data(), 256);
    dequantize(t, q.data(), back.data(), 256);
    EXPECT_NEAR(back[100], 40.0f, 40.0f * 0.05f) << ggml_type_info(t).name;
  }
}

TEST(Quantize, RefusesNonFiniteValuesAndPartialBlocks) {
  std::vector<float> x(32, 1.0f);
  std::vector<uint8_t> q(64);
  x[3] = std::nanf("");
  std::string msg = test::error_of([&] { quantize(GgmlType::Q8_0, x.data(), q.data(), 32); });
  EXPECT_NE(msg.find("non-finite"), std::string::npos) << msg;
  msg = test::error_of([&] { quantize(GgmlType::Q4_0, x.data(), q.data(), 31); });
  EXPECT_NE(msg.find("whole number"), std::string::npos) << msg;
  msg = test::error_of([&] { quantize(GgmlType::Q2_K, x.data(), q.data(), 256); });
  EXPECT_NE(msg.find("q2_K"), std::string::npos) << msg;
}

TEST(QuantizedDType, SizesNamesAndGgmlTypes) {
  EXPECT_TRUE(is_quantized(DType::Q4_K));
  EXPECT_FALSE(is_quantized(DType::BF16));
  EXPECT_FALSE(is_floating_point(DType::Q8_0));
  EXPECT_EQ(dtype_block_size(DType::Q4_0), 32);
  EXPECT_EQ(dtype_block_size(DType::Q6_K), 256);
  EXPECT_EQ(dtype_block_size(DType::F16), 1);
  EXPECT_EQ(dtype_nbytes(DType::Q4_0, 64), 36u);
  EXPECT_EQ(dtype_nbytes(DType::Q6_K, 512), 420u);
  EXPECT_EQ(dtype_nbytes(DType::BF16, 3), 6u);
  EXPECT_DOUBLE_EQ(dtype_byte_size(DType::Q4_0), 18.0 / 32);
  EXPECT_EQ(parse_dtype("Q4_K"), DType::Q4_K);
  EXPECT_EQ(parse_dtype("q8_0"), DType::Q8_0);
  EXPECT_EQ(dtype_from_safetensors(""), std::nullopt);
  EXPECT_EQ(dtype_from_numpy("q5_k"), DType::Q5_K);  // ferry's own offload index
  for (DType t : kQuantizedDTypes) {
    const auto g = ggml_type_of(t);
    ASSERT_TRUE(g.has_value()) << dtype_name(t);
    EXPECT_EQ(dtype_of_ggml(*g), t);
    EXPECT_EQ(ggml_type_info(*g).block_bytes, dtype_size(t)) << dtype_name(t);
    EXPECT_EQ(ggml_type_info(*g).block_size, dtype_block_size(t)) << dtype_name(t);
  }
  EXPECT_EQ(dtype_of_ggml(GgmlType::Q2_K), std::nullopt);
}

TEST(QuantizedTensor, BlocksPerRowViewsAndConversions) {
  const auto values = normal_values(4 * 256, 3);
  Tensor f = Tensor::from_vector(values, {4, 256});
  Tensor q = f.to(DType::Q4_K);
  EXPECT_EQ(q.dtype(), DType::Q4_K);
  EXPECT_EQ(q.nbytes(), 4u * 144u);
  // Rows are whole blocks: a row slice is the same bytes as the row of the whole.
  Tensor row2 = q.slice(2, 3).to(DType::F32);
  std::vector<float> all = q.to_vector<float>();
  std::vector<float> r2 = row2.to_vector<float>();
  for (int i = 0; i < 256; ++i) ASSERT_EQ(r2[i], all[2 * 256 + i]);
  EXPECT_EQ(q.reshape({2, 512}).nbytes(), q.nbytes());
  // Quantized -> another quantized type goes through f32.
  Tensor q8 = q.to(DType::Q8_0);
  EXPECT_EQ(q8.nbytes(), 4u * 8u * 34u);
  Tensor filled = Tensor::full({2, 32}, 0.25, DType::Q8_0);
  for (float v : filled.to_vector<float>()) ASSERT_NEAR(v, 0.25f, 1e-3f);  // d = f16(0.25 / 127), q = 127
  Tensor z = Tensor::zeros({1, 64}, DType::Q4_1);
  for (float v : z.to_vector<float>()) ASSERT_EQ(v, 0.0f);

  std::string msg = test::error_of([] { Tensor::empty({3, 100}, DType::Q4_0); });
  EXPECT_NE(msg.find("multiple of 32"), std::string::npos) << msg;
  msg = test::error_of([&] { q.reshape({8, 128}); });
  EXPECT_NE(msg.find("multiple of 256"), std::string::npos) << msg;
  msg = test::error_of([] { Tensor::empty({64}, DType::Q8_0).slice(0, 32); });
  EXPECT_NE(msg.find("1-D"), std::string::npos) << msg;
  msg = test::error_of([&] { (void)q.data_as<uint16_t>(); });
  EXPECT_NE(msg.find("q4_k"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ferry
