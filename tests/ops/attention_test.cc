// Causal GQA attention over a KV cache: prefill, decode, chunked prefill, sliding windows, GQA/MQA head maps,
// f16/bf16 caches and odd head dims against a double-precision masked-softmax reference, on every ISA; errors.
#include "ferry/ops/attention.h"

#include <gmock/gmock.h>

#include "ops/op_test_util.h"

namespace ferry::ops {
namespace {

using ::testing::HasSubstr;
using namespace ferry::ops::optest;

struct Case {
  int64_t T, S, Hq, Hkv, D, Dv, q_offset, window;
};

// Attention written out: explicit mask over all S keys, softmax in double.
std::vector<double> attention_ref(const Tensor& q, const Tensor& k, const Tensor& v, const Case& c, double scale,
                                  double softcap = 0) {
  auto qv = q.to_vector<float>(), kv = k.to_vector<float>(), vv = v.to_vector<float>();
  std::vector<double> out(static_cast<std::size_t>(c.T * c.Hq * c.Dv), 0.0);
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t h = 0; h < c.Hq; ++h) {
      const int64_t g = h / (c.Hq / c.Hkv), pos = c.q_offset + t;
      std::vector<double> score(c.S, -INFINITY);
      double m = -INFINITY;
      for (int64_t s = 0; s < c.S; ++s) {
        const bool visible = s <= pos && (c.window == 0 || s > pos - c.window);
        if (!visible) continue;
        double dot = 0;
        for (int64_t d = 0; d < c.D; ++d) dot += double(qv[(t * c.Hq + h) * c.D + d]) * kv[(s * c.Hkv + g) * c.D + d];
        score[s] = softcap > 0 ? softcap * std::tanh(dot * scale / softcap) : dot * scale;
        m = std::max(m, score[s]);
      }
      double sum = 0;
      for (double& e : score) sum += (e = std::exp(e - m));
      for (int64_t s = 0; s < c.S; ++s)
        for (int64_t d = 0; d < c.Dv; ++d)
          out[(t * c.Hq + h) * c.Dv + d] += score[s] / sum * vv[(s * c.Hkv + g) * c.Dv + d];
    }
  return out;
}

TEST(Attention, EveryCaseDTypeAndIsaMatchesReference) {
  const Case cases[] = {
      {1, 1, 1, 1, 1, 1, 0, 0},        // one token, one key
      {5, 5, 4, 2, 8, 8, 0, 0},        // prefill with GQA
      {1, 33, 8, 2, 64, 64, 32, 0},    // decode step
      {4, 20, 6, 1, 7, 7, 16, 0},      // chunked prefill, MQA, odd head_dim
      {9, 9, 2, 2, 33, 33, 0, 3},      // sliding window
      {1, 100, 4, 4, 128, 128, 99, 17},  // decode inside a window
      {3, 12, 2, 1, 16, 16, 5, 0},     // cache longer than needed: keys past q_offset + T are never read
      {2, 6, 2, 2, 16, 24, 4, 0},      // v head_dim differs from q/k
      {2, 600, 4, 1, 16, 16, 598, 0},  // several key blocks (the AVX2 kernel walks 256 keys at a time)
      {1, 700, 8, 2, 8, 8, 699, 300},  // a window spanning block boundaries
  };
  for (DType kv_dtype : {DType::F32, DType::F16, DType::BF16})
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << dtype_name(kv_dtype) << " T=" << c.T << " S=" << c.S << " Hq=" << c.Hq
                                        << " Hkv=" << c.Hkv << " D=" << c.D << " Dv=" << c.Dv << " off=" << c.q_offset
                                        << " window=" << c.window);
      Tensor q = random_tensor({c.T, c.Hq, c.D}, DType::F32, 1, -2, 2);
      Tensor k = random_tensor({c.S, c.Hkv, c.D}, kv_dtype, 2, -2, 2);
      Tensor v = random_tensor({c.S, c.Hkv, c.Dv}, kv_dtype, 3);
      if (c.S > c.q_offset + c.T) {  // poison the keys no query may see: a leak would turn outputs NaN
        Tensor k32 = k.to(DType::F32);
        auto kvals = k32.to_vector<float>();
        for (int64_t i = (c.q_offset + c.T) * c.Hkv * c.D; i < static_cast<int64_t>(kvals.size()); ++i) kvals[i] = NAN;
        k = Tensor::from_vector(kvals, k.shape(), kv_dtype);
      }
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
      const auto want = attention_ref(q, k, v, c, scale);
      for_each_isa([&](Isa) {
        Tensor out = attention(misaligned(q), misaligned(k), v, c.q_offset, scale, c.window);
        EXPECT_EQ(out.shape(), (Shape{c.T, c.Hq, c.Dv}));
        EXPECT_TRUE(all_close(out.to_vector<float>(), want, 1e-5, 1e-5));
      });
    }
}

// Gemma 2's attn_logit_softcapping: each scaled score s becomes cap · tanh(s / cap) before the softmax, inside
// the window, on every ISA and cache dtype. The scores here are often several times the cap of 2.
TEST(Attention, SoftcapBendsScaledScoresBeforeTheSoftmax) {
  const Case cases[] = {{6, 6, 4, 2, 16, 16, 0, 0}, {1, 300, 2, 1, 32, 32, 299, 0}, {5, 40, 4, 4, 8, 8, 35, 7}};
  for (DType kv_dtype : {DType::F32, DType::BF16})
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << dtype_name(kv_dtype) << " T=" << c.T << " S=" << c.S);
      Tensor q = random_tensor({c.T, c.Hq, c.D}, DType::F32, 4, -2, 2);
      Tensor k = random_tensor({c.S, c.Hkv, c.D}, kv_dtype, 5, -2, 2);
      Tensor v = random_tensor({c.S, c.Hkv, c.Dv}, kv_dtype, 6);
      const float scale = 0.7f;
      const auto want = attention_ref(q, k, v, c, scale, 2.0);
      const auto uncapped = attention_ref(q, k, v, c, scale);
      double moved = 0;
      for (std::size_t i = 0; i < want.size(); ++i) moved = std::max(moved, std::abs(want[i] - uncapped[i]));
      EXPECT_GT(moved, 1e-2) << "the cap should change the outputs";
      for_each_isa([&](Isa) {
        EXPECT_TRUE(
            all_close(attention(q, k, v, c.q_offset, scale, c.window, 2.0f).to_vector<float>(), want, 1e-5, 1e-5));
      });
    }
  Tensor q = Tensor::zeros({1, 1, 8}, DType::F32), k = Tensor::zeros({1, 1, 8}, DType::F32);
  EXPECT_THAT(error_of([&] { attention(q, k, k, 0, 1.0f, 0, -1.0f); }), HasSubstr("softcap -1 must be ≥ 0"));
}

// T5's attention (attention_with_bias): the bias row [H, T, S] added to the scaled scores, causal or not, with
// queries at an offset. Short query blocks go through the attention kernel, 16 or more (an encoder over its prompt)
// through the GEMM kernels, several blocks of 256 queries too; every ISA, f32 / bf16 keys and values.
TEST(Attention, WithBiasEveryPathMatchesReference) {
  struct BiasCase {
    int64_t T, S, H, D, Dv, q_offset;
    bool causal, bias;
  };
  const BiasCase cases[] = {
      {1, 1, 1, 8, 8, 0, false, true},        // one query, one key
      {7, 7, 4, 16, 16, 0, false, true},      // a short encoder pass: the kernel path
      {1, 40, 4, 64, 64, 39, true, true},     // a decoder step over its cache
      {1, 23, 3, 64, 64, 0, false, false},    // cross-attention: no bias, not causal
      {16, 16, 2, 8, 8, 0, false, true},      // the shortest GEMM block
      {130, 130, 4, 64, 64, 0, false, true},  // an encoder pass: GEMMs, S not a multiple of the tiles
      {20, 45, 2, 16, 24, 25, true, true},    // a chunk of decoder tokens after 25 cached (GEMM path, causal mask)
      {300, 300, 1, 8, 8, 0, true, false},    // two query blocks of the GEMM path, causal
      {17, 5, 2, 8, 8, 0, false, true},       // more queries than keys
  };
  for (DType kv_dtype : {DType::F32, DType::BF16})
    for (const BiasCase& c : cases) {
      SCOPED_TRACE(::testing::Message() << dtype_name(kv_dtype) << " T=" << c.T << " S=" << c.S << " H=" << c.H
                                        << " off=" << c.q_offset << " causal=" << c.causal);
      const Tensor q = random_tensor({c.T, c.H, c.D}, DType::F32, 7, -2, 2);
      const Tensor k = random_tensor({c.S, c.H, c.D}, kv_dtype, 8, -2, 2);
      const Tensor v = random_tensor({c.S, c.H, c.Dv}, kv_dtype, 9);
      const Tensor bias = c.bias ? random_tensor({c.H, c.T, c.S}, DType::F32, 10, -3, 3) : Tensor();
      const float scale = 0.5f;
      const auto qv = q.to_vector<float>(), kv = k.to(DType::F32).to_vector<float>(),
                 vv = v.to(DType::F32).to_vector<float>();
      const std::vector<float> bv = c.bias ? bias.to_vector<float>() : std::vector<float>();
      std::vector<double> want(static_cast<std::size_t>(c.T * c.H * c.Dv), 0.0);
      for (int64_t t = 0; t < c.T; ++t)
        for (int64_t h = 0; h < c.H; ++h) {
          const int64_t n = c.causal ? c.q_offset + t + 1 : c.S;
          std::vector<double> score(static_cast<std::size_t>(n));
          double m = -INFINITY, sum = 0;
          for (int64_t j = 0; j < n; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < c.D; ++d) dot += double(qv[(t * c.H + h) * c.D + d]) * kv[(j * c.H + h) * c.D + d];
            score[j] = dot * scale + (c.bias ? bv[(h * c.T + t) * c.S + j] : 0.0);
            m = std::max(m, score[j]);
          }
          for (double& e : score) sum += (e = std::exp(e - m));
          for (int64_t j = 0; j < n; ++j)
            for (int64_t d = 0; d < c.Dv; ++d)
              want[(t * c.H + h) * c.Dv + d] += score[j] / sum * vv[(j * c.H + h) * c.Dv + d];
        }
      for_each_isa([&](Isa) {
        const Tensor out = attention_with_bias(q, k, v, bias, c.q_offset, c.causal, scale);
        EXPECT_EQ(out.shape(), (Shape{c.T, c.H, c.Dv}));
        EXPECT_TRUE(all_close(out.to_vector<float>(), want, 1e-5, 1e-5));
      });
    }
}

TEST(Attention, ErrorsExplainTheMismatch) {
  Tensor q = Tensor::zeros({2, 4, 8}, DType::F32), k = Tensor::zeros({5, 2, 8}, DType::F16);
  Tensor v = Tensor::zeros({5, 2, 8}, DType::F16);
  EXPECT_NO_THROW(attention(q, k, v, 3, 0.5f));
  std::string msg = error_of([&] { attention(q, k, v, 4, 0.5f); });
  EXPECT_THAT(msg, HasSubstr("ops::attention"));
  EXPECT_THAT(msg, HasSubstr("holds 5 keys"));
  EXPECT_THAT(error_of([&] { attention(Tensor::zeros({2, 3, 8}, DType::F32), k, v, 0, 0.5f); }),
              HasSubstr("must divide query heads"));
  EXPECT_THAT(error_of([&] { attention(q, k, Tensor::zeros({5, 2, 8}, DType::BF16), 0, 0.5f); }),
              HasSubstr("same dtype"));
  EXPECT_THAT(error_of([&] { attention(q, Tensor::zeros({5, 2, 4}, DType::F16), v, 0, 0.5f); }),
              HasSubstr("head_dim differ"));
  EXPECT_THAT(error_of([&] { attention(q, k.to(DType::F8_E4M3FN), v.to(DType::F8_E4M3FN), 0, 0.5f); }),
              HasSubstr("cache dtype"));
  EXPECT_THAT(error_of([&] { attention(q, k, v, 0, 0.5f, -1); }), HasSubstr("must not be negative"));
  EXPECT_THAT(error_of([&] { attention(q.reshape({8, 8}), k, v, 0, 0.5f); }), HasSubstr("[tokens, heads, head_dim]"));
}

}  // namespace
}  // namespace ferry::ops
