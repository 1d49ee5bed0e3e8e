// The quantized GEMM (prefill on AVX-512 VNNI, ops/cpu/quant_gemm*.cc) against a double reference on the same
// dequantized weights and 8-bit activations: the GEMV's arithmetic, so only f32 summation noise may differ — for
// every quantized type, shapes that leave partial strips, panels, K blocks and passes, with and without bias; and
// through ops::linear, each row of a prefill equal to that row decoded alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ferry/core/quant.h"
#include "ferry/ops/linear.h"
#include "op_test_util.h"
#include "ops/cpu/quant_kernels.h"

namespace ferry::ops {
namespace {

using optest::within_summation_noise;

struct Case {
  DType dt;
  Tensor w;                // [N, K] quantized
  std::vector<float> deq;  // its exact f32 values
};

Case make_case(DType dt, int64_t N, int64_t K, uint32_t seed) {
  Tensor f = optest::random_tensor({N, K}, DType::F32, seed);
  Case c{dt, f.to(dt), {}};
  c.deq = c.w.to_vector<float>();
  return c;
}

// The activations quantized as quant_gemv does (rows of row_size bytes), and their values d · q.
struct Activations {
  std::vector<uint8_t> bytes;
  std::size_t row_size = 0;
  std::vector<float> values;
};

Activations quantize(const std::vector<float>& x, int64_t M, int64_t K, DType wt) {
  Activations a;
  const bool kb = cpu::uses_kblocks(wt);
  a.row_size = kb ? K / 256 * sizeof(cpu::QBlockK) : K / 32 * sizeof(cpu::QBlock8);
  a.bytes.resize(a.row_size * M);
  a.values.resize(x.size());
  for (int64_t m = 0; m < M; ++m) {
    uint8_t* row = a.bytes.data() + m * a.row_size;
    if (kb) {
      auto* b = reinterpret_cast<cpu::QBlockK*>(row);
      cpu::scalar::quantize_x_k(x.data() + m * K, K, b);
      for (int64_t i = 0; i < K; ++i) a.values[m * K + i] = b[i / 256].d * b[i / 256].q[i % 256];
    } else {
      auto* b = reinterpret_cast<cpu::QBlock8*>(row);
      cpu::scalar::quantize_x(x.data() + m * K, K, b);
      for (int64_t i = 0; i < K; ++i) a.values[m * K + i] = b[i / 32].d * b[i / 32].q[i % 32];
    }
  }
  return a;
}

// want = Σ deq · xq (+ bias) in double, and mag = Σ |deq · xq| (the scale of its summation noise).
void reference(const Case& c, const std::vector<float>& xv, int64_t M, int64_t N, int64_t K, const float* bias,
               std::vector<double>& want, std::vector<double>& mag) {
  want.assign(M * N, 0.0);
  mag.assign(M * N, 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = bias ? bias[n] : 0.0, a = bias ? std::abs(bias[n]) : 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(c.deq[n * K + k]) * xv[m * K + k];
        s += p, a += std::abs(p);
      }
      want[m * N + n] = s, mag[m * N + n] = a;
    }
}

bool have_gemm() { return cpu_supports(Isa::AVX512); }

TEST(QuantGemm, EveryTypeAndShapeMatchesTheDequantizedWeights) {
  if (!have_gemm()) GTEST_SKIP() << "the quantized GEMM needs AVX-512 VNNI";
  struct Shape3 {
    int64_t M, N, K;
  };
  // K = 1280: five K-quant blocks, two K blocks of 512 and a partial one; N = 33 / 100: partial strips and tasks;
  // M = 5 / 7 / 40: partial panels; M = 600: two passes of 300 rows.
  const Shape3 shapes[] = {{1, 1, 256}, {5, 33, 512}, {7, 64, 1280}, {40, 100, 768}, {600, 40, 256}};
  for (DType dt : kQuantizedDTypes) {
    for (const auto& s : shapes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " M " + std::to_string(s.M) + " N " + std::to_string(s.N) + " K " +
                   std::to_string(s.K));
      const Case c = make_case(dt, s.N, s.K, 7 + static_cast<uint32_t>(s.N));
      const auto xv = optest::random_floats(s.M * s.K, 31 + static_cast<uint32_t>(s.M), -2.0f, 2.0f);
      const Activations a = quantize(xv, s.M, s.K, dt);
      const auto bias = optest::random_floats(s.N, 3);
      for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
        std::vector<float> y(s.M * s.N, NAN);
        cpu::quant_gemm(dt, c.w.raw_data(), s.N, s.K, s.M, a.bytes.data(), a.row_size, b, y.data());
        std::vector<double> want, mag;
        reference(c, a.values, s.M, s.N, s.K, b, want, mag);
        EXPECT_TRUE(within_summation_noise(y, want, mag)) << (b ? "with bias" : "no bias");
      }
    }
  }
}

// Levels at their extremes (every weight and activation at ±max): the integer sums are exact, nothing wraps.
TEST(QuantGemm, ExtremeLevelsAreExact) {
  if (!have_gemm()) GTEST_SKIP() << "the quantized GEMM needs AVX-512 VNNI";
  const int64_t M = 8, N = 40, K = 512;
  for (DType dt : kQuantizedDTypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    std::vector<float> wv(N * K), xv(M * K);
    for (int64_t i = 0; i < N * K; ++i) wv[i] = (i % 3 == 0) ? -1.0f : 1.0f;
    for (int64_t i = 0; i < M * K; ++i) xv[i] = (i % 5 == 0) ? -3.0f : 3.0f;
    Case c{dt, Tensor::from_vector(wv, {N, K}).to(dt), {}};
    c.deq = c.w.to_vector<float>();
    const Activations a = quantize(xv, M, K, dt);
    std::vector<float> y(M * N);
    cpu::quant_gemm(dt, c.w.raw_data(), N, K, M, a.bytes.data(), a.row_size, nullptr, y.data());
    std::vector<double> want, mag;
    reference(c, a.values, M, N, K, nullptr, want, mag);
    EXPECT_TRUE(within_summation_noise(y, want, mag));
  }
}

// Through ops::linear: a prefill of M rows takes the GEMM (M ≥ quant_gemm_min_rows), each row decoded alone the GEMV;
// both quantize the activations the same way, so the rows agree to summation noise.
TEST(QuantGemm, PrefillRowsEqualEachRowAlone) {
  if (!have_gemm()) GTEST_SKIP() << "the quantized GEMM needs AVX-512 VNNI";
  const int64_t N = 48, K = 768;
  for (DType dt : kQuantizedDTypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Case c = make_case(dt, N, K, 5);
    for (int64_t M : {cpu::quant_gemm_min_rows(dt), int64_t{70}}) {
      ASSERT_TRUE(cpu::use_quant_gemm(cpu_isa(), dt, M));
      const auto xv = optest::random_floats(M * K, 9 + static_cast<uint32_t>(M), -2.0f, 2.0f);
      const auto all = linear(Tensor::from_vector(xv, {M, K}), c.w).to_vector<float>();
      const Activations a = quantize(xv, M, K, dt);
      std::vector<double> want, mag;
      reference(c, a.values, M, N, K, nullptr, want, mag);
      std::vector<float> solo(M * N);
      for (int64_t m = 0; m < M; ++m) {
        std::vector<float> row(xv.begin() + m * K, xv.begin() + (m + 1) * K);
        const auto y = linear(Tensor::from_vector(row, {1, K}), c.w).to_vector<float>();
        std::copy(y.begin(), y.end(), solo.begin() + m * N);
      }
      EXPECT_TRUE(within_summation_noise(all, want, mag)) << "prefill";
      EXPECT_TRUE(within_summation_noise(solo, want, mag)) << "one row at a time";
    }
  }
}

}  // namespace
}  // namespace ferry::ops
