// Embedding lookup (every float weight dtype, i64/i32 ids, bad ids), argmax and top-k (ties, NaN, rows), and the
// element converters every kernel streams through (AVX2 bit-identical to scalar for all f16/bf16/fp8 codes).
#include "ferry/ops/gather.h"

#include <gmock/gmock.h>

#include <cstring>

#include "ferry/core/convert.h"
#include "ops/cpu/to_f32.h"
#include "ops/op_test_util.h"

namespace ferry::ops {
namespace {

using ::testing::HasSubstr;
using namespace ferry::ops::optest;

TEST(Embedding, RowsOfEveryFloatDTypeAreConvertedExactly) {
  for (DType wt : {DType::F32, DType::F16, DType::BF16, DType::F8_E4M3FN, DType::F8_E5M2, DType::F64})
    for (int64_t D : {1, 7, 8, 33, 4097}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(wt) << " D=" << D);
      const int64_t V = 11;
      Tensor w = random_tensor({V, D}, wt, 1, -3, 3);
      std::vector<int64_t> ids = {3, 0, 10, 3, 7, 1};
      auto wv = w.to_vector<float>();
      std::vector<float> want;
      for (int64_t id : ids) want.insert(want.end(), wv.begin() + id * D, wv.begin() + (id + 1) * D);
      for_each_isa([&](Isa) {
        Tensor out = embedding(misaligned(w), Tensor::from_vector(ids, {2, 3}));
        EXPECT_EQ(out.shape(), (Shape{2, 3, D}));
        EXPECT_TRUE(all_equal(out.to_vector<float>(), want));
        std::vector<int32_t> ids32(ids.begin(), ids.end());
        EXPECT_TRUE(all_equal(embedding(w, Tensor::from_vector(ids32, {6})).to_vector<float>(), want));
      });
    }
}

TEST(Embedding, BadIdsAndArgumentsAreReported) {
  Tensor w = Tensor::zeros({5, 4}, DType::BF16);
  std::string msg = error_of([&] { embedding(w, Tensor::from_vector(std::vector<int64_t>{1, 5, 2}, {3})); });
  EXPECT_THAT(msg, HasSubstr("ops::embedding"));
  EXPECT_THAT(msg, HasSubstr("token id 5 (at index 1"));
  EXPECT_THAT(msg, HasSubstr("[0, 5)"));
  EXPECT_THAT(error_of([&] { embedding(w, Tensor::from_vector(std::vector<int64_t>{-1}, {1})); }),
              HasSubstr("token id -1"));
  EXPECT_THAT(error_of([&] { embedding(w, Tensor::zeros({2}, DType::F32)); }), HasSubstr("token ids"));
  EXPECT_THAT(error_of([&] { embedding(Tensor::zeros({5, 4}, DType::I8), Tensor::zeros({2}, DType::I64)); }),
              HasSubstr("floating-point"));
  EXPECT_EQ(embedding(w, Tensor::zeros({0}, DType::I64)).shape(), (Shape{0, 4}));
}

TEST(Argmax, FirstMaximumPerRowWithNaNOnTop) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 5, 5, -2, /**/ -1, -3, -1, -7, /**/ 0, NAN, 9, NAN}, {3, 4});
  for_each_isa([&](Isa) {
    EXPECT_EQ(argmax(x).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
    EXPECT_EQ(argmax(x).shape(), (Shape{3}));
    EXPECT_EQ(argmax(Tensor::full({5}, -INFINITY, DType::F32)).item<int64_t>(), 0);
  });
  EXPECT_THAT(error_of([] { argmax(Tensor::zeros({2, 0}, DType::F32)); }), HasSubstr("empty"));
}

TEST(Argmax, EveryIsaFindsTheFirstMaximumAnywhere) {
  for (int64_t V : kOddSizes)
    for (int64_t at : {int64_t{0}, V / 2, V - 1}) {
      SCOPED_TRACE(::testing::Message() << "V=" << V << " at=" << at);
      auto v = random_floats(V, static_cast<uint32_t>(V + at));
      v[at] = 2.0f;
      if (at + 3 < V) v[at + 3] = 2.0f;  // a later tie must lose
      Tensor x = misaligned(Tensor::from_vector(v, {V}));
      for_each_isa([&](Isa) { EXPECT_EQ(argmax(x).item<int64_t>(), at); });
      if (V > 1) {  // a NaN anywhere wins over the maximum, wherever it sits (vector body or tail)
        v[V - 1 - at] = NAN;
        Tensor xn = Tensor::from_vector(v, {V});
        for_each_isa([&](Isa) { EXPECT_EQ(argmax(xn).item<int64_t>(), V - 1 - at); });
      }
    }
}

TEST(Topk, SortedDescendingWithStableTies) {
  Tensor x = Tensor::from_vector(std::vector<float>{0.5f, 2, -1, 2, 7, NAN, 0.5f}, {7});
  auto [values, indices] = topk(x, 5);
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{5, 4, 1, 3, 0}));
  auto vals = values.to_vector<float>();
  EXPECT_TRUE(std::isnan(vals[0]));
  EXPECT_EQ(std::vector<float>(vals.begin() + 1, vals.end()), (std::vector<float>{7, 2, 2, 0.5f}));
  EXPECT_EQ(topk(x, 0).first.shape(), (Shape{0}));
  EXPECT_EQ(topk(x, 7).second.to_vector<int64_t>(), (std::vector<int64_t>{5, 4, 1, 3, 0, 6, 2}));
  EXPECT_THAT(error_of([&] { topk(x, 8); }), HasSubstr("k = 8"));
  EXPECT_THAT(error_of([&] { topk(x.reshape({1, 7}), 1); }), HasSubstr("1-D"));
}

// ---- element converters (ops/cpu/to_f32.h) ---------------------------------------------------------------------

std::vector<float> convert_all(DType t, const void* src, int64_t n, Isa isa, int64_t offset = 0) {
  std::vector<float> out(static_cast<std::size_t>(n));
  const auto* p = static_cast<const char*>(src) + offset * static_cast<int64_t>(dtype_size(t));
#if FERRY_X86_KERNELS
  if (isa >= Isa::AVX2) return cpu::to_f32_avx2(t, p, out.data(), n), out;
#else
  (void)isa;
#endif
  cpu::to_f32_scalar(t, p, out.data(), n);
  return out;
}

TEST(ToF32, EveryCodeConvertsExactlyOnEveryIsa) {
  std::vector<uint8_t> bytes(256);
  for (int i = 0; i < 256; ++i) bytes[i] = static_cast<uint8_t>(i);
  std::vector<uint16_t> halves(65536);
  for (int i = 0; i < 65536; ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> e4m3(256), e5m2(256), f16(65536), bf16(65536);
  for (int i = 0; i < 256; ++i) e4m3[i] = f8_e4m3fn_to_f32(bytes[i]), e5m2[i] = f8_e5m2_to_f32(bytes[i]);
  for (int i = 0; i < 65536; ++i) f16[i] = f16_to_f32(halves[i]), bf16[i] = bf16_to_f32(halves[i]);
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    EXPECT_TRUE(all_equal(convert_all(DType::F8_E4M3FN, bytes.data(), 256, isa), e4m3));
    EXPECT_TRUE(all_equal(convert_all(DType::F8_E5M2, bytes.data(), 256, isa), e5m2));
    EXPECT_TRUE(all_equal(convert_all(DType::F16, halves.data(), 65536, isa), f16));
    EXPECT_TRUE(all_equal(convert_all(DType::BF16, halves.data(), 65536, isa), bf16));
    // Odd lengths from odd offsets: the 8-wide body and the scalar tail agree.
    for (int64_t n : {1, 7, 9, 17, 255}) {
      EXPECT_TRUE(all_equal(convert_all(DType::F8_E4M3FN, bytes.data(), n, isa, 1),
                            std::vector<float>(e4m3.begin() + 1, e4m3.begin() + 1 + n)));
      EXPECT_TRUE(all_equal(convert_all(DType::F16, halves.data(), n, isa, 3),
                            std::vector<float>(f16.begin() + 3, f16.begin() + 3 + n)));
    }
  }
}

}  // namespace
}  // namespace ferry::ops
