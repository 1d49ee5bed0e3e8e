// ops::linear with block-quantized weights (q8_0 ... q6_k) on every ISA: the quantized kernels against a double
// reference on the dequantized weights and the same 8-bit activations (the kernel's exact arithmetic up to f32
// summation order) for decode-sized and prefill-sized inputs, the accuracy that activation quantization costs
// against f32 activations, embedding lookups of quantized rows, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "ferry/core/quant.h"
#include "ferry/ops/gather.h"
#include "ferry/ops/linear.h"
#include "op_test_util.h"
#include "ops/cpu/quant_kernels.h"
#include "support/error_of.h"

namespace ferry::ops {
namespace {

using optest::all_close;

// Weights of `dtype` [N, K] from normal-ish values, and their exact dequantized f32 values.
struct QuantWeight {
  Tensor q;
  std::vector<float> deq;
};

QuantWeight make_weight(DType dtype, int64_t N, int64_t K, uint32_t seed) {
  Tensor f = optest::random_tensor({N, K}, DType::F32, seed);
  QuantWeight w{f.to(dtype), {}};
  w.deq = w.q.to_vector<float>();
  return w;
}

// y[m, n] = Σ_k deq[n, k] · xv[m, k] in double.
std::vector<double> reference(const std::vector<float>& deq, const std::vector<float>& xv, int64_t M, int64_t N,
                              int64_t K, const std::vector<float>* bias = nullptr) {
  std::vector<double> y(static_cast<std::size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = bias ? (*bias)[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) acc += double(deq[n * K + k]) * xv[m * K + k];
      y[m * N + n] = acc;
    }
  return y;
}

// x as the kernel sees it: each run of 32 (or, for the K-quants, 256) quantized to int8 with one scale.
std::vector<float> quantized_activations(const std::vector<float>& x, int64_t M, int64_t K, DType wt) {
  std::vector<float> out(x.size());
  if (cpu::uses_kblocks(wt)) {
    std::vector<cpu::QBlockK> blocks(static_cast<std::size_t>(K / 256));
    for (int64_t m = 0; m < M; ++m) {
      cpu::scalar::quantize_x_k(x.data() + m * K, K, blocks.data());
      for (int64_t g = 0; g < K / 256; ++g)
        for (int i = 0; i < 256; ++i) out[m * K + 256 * g + i] = blocks[g].d * blocks[g].q[i];
    }
    return out;
  }
  std::vector<cpu::QBlock8> blocks(static_cast<std::size_t>(K / 32));
  for (int64_t m = 0; m < M; ++m) {
    cpu::scalar::quantize_x(x.data() + m * K, K, blocks.data());
    for (int64_t g = 0; g < K / 32; ++g)
      for (int i = 0; i < 32; ++i) out[m * K + 32 * g + i] = blocks[g].d * blocks[g].q[i];
  }
  return out;
}

double rel_rms(const std::vector<float>& got, const std::vector<double>& want) {
  double e = 0, r = 0;
  for (std::size_t i = 0; i < got.size(); ++i) e += (got[i] - want[i]) * (got[i] - want[i]), r += want[i] * want[i];
  return std::sqrt(e / r);
}

TEST(QuantLinear, GemvMatchesTheDequantizedWeightsOnEveryIsa) {
  const int64_t N = 37, K = 512;
  for (DType dt : kQuantizedDTypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const QuantWeight w = make_weight(dt, N, K, 11);
    const auto bias_v = optest::random_floats(N, 5);
    const Tensor bias = Tensor::from_vector(bias_v, {N});
    for (int64_t M : {1, 2, 3, 4, 5, 7, 8, 9, 13, 16}) {  // the AVX2 kernel takes 4 rows a call, AVX-512 8
      SCOPED_TRACE("rows " + std::to_string(M));
      const auto xv = optest::random_floats(M * K, 100 + static_cast<uint32_t>(M), -2.0f, 2.0f);
      const Tensor x = Tensor::from_vector(xv, {M, K});
      const auto want = reference(w.deq, quantized_activations(xv, M, K, dt), M, N, K, &bias_v);
      optest::for_each_isa([&](Isa) {
        EXPECT_TRUE(all_close(linear(x, w.q, bias).to_vector<float>(), want, 1e-5, 1e-4));
      });
    }
  }
}

// The SIMD GEMV of q4_0 / q4_1 / q5_0 / q5_1 decodes groups two at a time (QPair8): rows with an odd number of
// 32-element groups end in a pair whose second group is zeros, on both sides.
TEST(QuantLinear, GemvPairsGroupsAndRowsWithAnOddGroupCountEndInAZeroGroup) {
  const int64_t N = 19;
  for (DType dt : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0}) {
    for (int64_t K : {32, 96, 544, 608}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " K " + std::to_string(K));
      const QuantWeight w = make_weight(dt, N, K, 17);
      for (int64_t M : {1, 3, 6}) {
        const auto xv = optest::random_floats(M * K, 300 + static_cast<uint32_t>(M + K), -2.0f, 2.0f);
        const Tensor x = Tensor::from_vector(xv, {M, K});
        const auto want = reference(w.deq, quantized_activations(xv, M, K, dt), M, N, K);
        optest::for_each_isa([&](Isa) { EXPECT_TRUE(all_close(linear(x, w.q).to_vector<float>(), want, 1e-5, 1e-4)); });
      }
    }
  }
}

TEST(QuantLinear, PairXInterleavesHalvesAndZeroPadsAnOddRow) {
  auto xv = optest::random_floats(96, 8, -3.0f, 3.0f);
  std::vector<cpu::QBlock8> b(3);
  cpu::scalar::quantize_x(xv.data(), 96, b.data());
  std::vector<cpu::QPair8> p(2);
  cpu::pair_x(b.data(), 3, p.data());
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(p[0].q[i], b[0].q[i]);
    EXPECT_EQ(p[0].q[16 + i], b[1].q[i]);
    EXPECT_EQ(p[0].q[32 + i], b[0].q[16 + i]);
    EXPECT_EQ(p[0].q[48 + i], b[1].q[16 + i]);
    EXPECT_EQ(p[1].q[i], b[2].q[i]);
    EXPECT_EQ(p[1].q[32 + i], b[2].q[16 + i]);
    EXPECT_EQ(p[1].q[16 + i], 0);
    EXPECT_EQ(p[1].q[48 + i], 0);
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(p[0].d[i], b[0].d);
    EXPECT_EQ(p[0].d[4 + i], b[1].d);
    EXPECT_EQ(p[1].d[4 + i], 0.0f);
  }
  EXPECT_EQ(p[0].dsum[0], b[0].dsum_all);
  EXPECT_EQ(p[0].dsum[4], b[1].dsum_all);
  EXPECT_EQ(p[1].dsum[0], b[2].dsum_all);
  for (int i : {1, 2, 3, 5, 6, 7}) EXPECT_EQ(p[0].dsum[i], 0.0f);
  EXPECT_EQ(p[1].dsum[4], 0.0f);
}

// What quantizing the activations to 8 bits costs, against f32 activations on the same (dequantized) weights:
// measured 0.44-0.45% relative RMS for every type (printed; with these outlier-free activations one scale per 256
// costs the K-quants nothing measurable — real models' logits are compared in gguf_llama_cpp_test.cc), bounded at
// 1.5%.
TEST(QuantLinear, ActivationQuantizationErrorIsSmall) {
  const int64_t N = 64, K = 1024;
  const auto xv = optest::random_floats(K, 9, -2.0f, 2.0f);
  const Tensor x = Tensor::from_vector(xv, {1, K});
  for (DType dt : kQuantizedDTypes) {
    const QuantWeight w = make_weight(dt, N, K, 12);
    const double err = rel_rms(linear(x, w.q).to_vector<float>(), reference(w.deq, xv, 1, N, K));
    std::printf("  %s: relative RMS error of the 8-bit-activation GEMV vs f32 activations %.4f\n",
                std::string(dtype_name(dt)).c_str(), err);
    EXPECT_LT(err, 0.015) << dtype_name(dt);
  }
}

// Prefill-sized inputs: rows beyond one tile of 64 (and a tile ending in a partial group of four) give each row's
// own result (AVX2: groups of four, AVX-512: of eight).
TEST(QuantLinear, ManyRowsAreServedInTilesLikeOneRowAtATime) {
  const int64_t N = 24, K = 768, M = 70;  // K: three K-quant blocks
  const auto xv = optest::random_floats(M * K, 21);
  const Tensor x = Tensor::from_vector(xv, {M, K});
  for (DType dt : kQuantizedDTypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const QuantWeight w = make_weight(dt, N, K, 13);
    const auto want = reference(w.deq, quantized_activations(xv, M, K, dt), M, N, K);
    optest::for_each_isa([&](Isa) { EXPECT_TRUE(all_close(linear(x, w.q).to_vector<float>(), want, 1e-5, 1e-4)); });
  }
}

#if FERRY_X86_KERNELS
TEST(QuantLinear, SimdActivationQuantizationIsBitIdenticalToScalar) {
  if (!cpu_supports(Isa::AVX2)) GTEST_SKIP() << "no AVX2";
  auto xv = optest::random_floats(32 * 64, 4, -3.0f, 3.0f);
  for (int i = 0; i < 32; ++i) xv[i] = 0.0f;                        // all-zero block
  for (int i = 32; i < 64; ++i) xv[i] = static_cast<float>(i % 5) * 0.5f;  // ties after scaling
  std::vector<cpu::QBlock8> a(64), b(64);
  cpu::scalar::quantize_x(xv.data(), 32 * 64, a.data());
  cpu::avx2::quantize_x(xv.data(), 32 * 64, b.data());
  for (int g = 0; g < 64; ++g) {
    ASSERT_EQ(a[g].d, b[g].d) << g;
    ASSERT_EQ(a[g].dsum[0], b[g].dsum[0]) << g;
    ASSERT_EQ(a[g].dsum[1], b[g].dsum[1]) << g;
    ASSERT_EQ(a[g].dsum_all, b[g].dsum_all) << g;
    for (int i = 0; i < 32; ++i) ASSERT_EQ(a[g].q[i], b[g].q[i]) << g << " " << i;
  }
  std::vector<cpu::QBlockK> ka(8), kb(8);
  cpu::scalar::quantize_x_k(xv.data(), 256 * 8, ka.data());
  cpu::avx2::quantize_x_k(xv.data(), 256 * 8, kb.data());
  for (int g = 0; g < 8; ++g) {
    ASSERT_EQ(ka[g].d, kb[g].d) << g;
    for (int i = 0; i < 16; ++i) ASSERT_EQ(ka[g].bsum[i], kb[g].bsum[i]) << g << " " << i;
    for (int i = 0; i < 256; ++i) ASSERT_EQ(ka[g].q[i], kb[g].q[i]) << g << " " << i;
  }
}
#endif

TEST(QuantLinear, EmbeddingDequantizesRowsExactly) {
  const QuantWeight w = make_weight(DType::Q6_K, 10, 256, 3);
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{7, 0, 7, 9}, {4});
  const auto got = embedding(w.q, ids).to_vector<float>();
  const int64_t rows[] = {7, 0, 7, 9};
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 256; ++k) ASSERT_EQ(got[i * 256 + k], w.deq[rows[i] * 256 + k]) << i << " " << k;
}

TEST(QuantLinear, ShapeErrorsNameTheQuantizedWeight) {
  const QuantWeight w = make_weight(DType::Q4_0, 8, 64, 1);
  const Tensor x = Tensor::zeros({1, 32}, DType::F32);
  const std::string msg = test::error_of([&] { linear(x, w.q); });
  EXPECT_NE(msg.find("q4_0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("in_features"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ferry::ops
