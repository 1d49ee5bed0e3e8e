// The quantized GEMM (prefill, ops/cpu/quant_gemm*.cc), with each ISA's kernels this CPU runs (AMX, AVX-512 VNNI,
// AVX2), against a double reference on the same dequantized weights and 8-bit activations: the GEMV's arithmetic, so
// only f32 summation noise may differ — for every quantized type, shapes that leave partial strips, panels, K blocks
// and passes, with and without bias; levels at the extremes, where the AVX2 kernels' int16 partial sums reach their
// bounds; and through ops::linear, each row of a prefill equal to that row decoded alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

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

// The ISAs with a quantized GEMM that this CPU runs.
std::vector<Isa> gemm_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::AVX2, Isa::AVX512, Isa::AMX})
    if (cpu_supports(isa)) isas.push_back(isa);
  return isas;
}

TEST(QuantGemm, EveryTypeAndShapeMatchesTheDequantizedWeights) {
  const auto isas = gemm_isas();
  if (isas.empty()) GTEST_SKIP() << "the quantized GEMM needs AVX2";
  struct Shape3 {
    int64_t M, N, K;
  };
  // Tiles: 16 × 32 (AMX), 6 × 32 (AVX-512), 4 × 16 (AVX2). K = 1280: five K-quant blocks, two K blocks of 512 and a
  // partial one; N = 33 / 100: partial strips and tasks; N = 8: half an AVX2 strip; M = 5 / 6 / 7 / 40: partial panels
  // of either ISA; M = 600: two passes of 300 rows.
  const Shape3 shapes[] = {{1, 1, 256},    {5, 33, 512},   {6, 8, 512},
                           {7, 64, 1280},  {40, 100, 768}, {600, 40, 256}};
  for (Isa isa : isas) {
    for (DType dt : kQuantizedDTypes) {
      for (const auto& s : shapes) {
        SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(dtype_name(dt)) + " M " + std::to_string(s.M) +
                     " N " + std::to_string(s.N) + " K " + std::to_string(s.K));
        const Case c = make_case(dt, s.N, s.K, 7 + static_cast<uint32_t>(s.N));
        const auto xv = optest::random_floats(s.M * s.K, 31 + static_cast<uint32_t>(s.M), -2.0f, 2.0f);
        const Activations a = quantize(xv, s.M, s.K, dt);
        const auto bias = optest::random_floats(s.N, 3);
        for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
          std::vector<float> y(s.M * s.N, NAN);
          cpu::quant_gemm(isa, dt, c.w.raw_data(), s.N, s.K, s.M, a.bytes.data(), a.row_size, b, y.data());
          std::vector<double> want, mag;
          reference(c, a.values, s.M, s.N, s.K, b, want, mag);
          EXPECT_TRUE(within_summation_noise(y, want, mag)) << (b ? "with bias" : "no bias");
        }
      }
    }
  }
}

// Levels at their extremes (every weight and activation at ±max): the integer sums are exact, nothing wraps.
TEST(QuantGemm, ExtremeLevelsAreExact) {
  const auto isas = gemm_isas();
  if (isas.empty()) GTEST_SKIP() << "the quantized GEMM needs AVX2";
  const int64_t M = 8, N = 40, K = 512;
  for (Isa isa : isas) {
    for (DType dt : kQuantizedDTypes) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(dtype_name(dt)));
      std::vector<float> wv(N * K), xv(M * K);
      for (int64_t i = 0; i < N * K; ++i) wv[i] = (i % 3 == 0) ? -1.0f : 1.0f;
      for (int64_t i = 0; i < M * K; ++i) xv[i] = (i % 5 == 0) ? -3.0f : 3.0f;
      Case c{dt, Tensor::from_vector(wv, {N, K}).to(dt), {}};
      c.deq = c.w.to_vector<float>();
      const Activations a = quantize(xv, M, K, dt);
      std::vector<float> y(M * N);
      cpu::quant_gemm(isa, dt, c.w.raw_data(), N, K, M, a.bytes.data(), a.row_size, nullptr, y.data());
      std::vector<double> want, mag;
      reference(c, a.values, M, N, K, nullptr, want, mag);
      EXPECT_TRUE(within_summation_noise(y, want, mag));
    }
  }
}

// Every weight level at the top of its range (q8_0: −128, the largest magnitude) and every activation level +127 or
// every one −127: all products of a group have one sign, so the AVX2 kernels' int16 partial sums (vpmaddubsw pairs,
// then vpaddw over as many chunks as the type's level range allows) reach their bounds; any saturation or wrap would
// show as a large error.
TEST(QuantGemm, LevelsAtTheBoundsOfTheInt16SumsAreExact) {
  const auto isas = gemm_isas();
  if (isas.empty()) GTEST_SKIP() << "the quantized GEMM needs AVX2";
  const int64_t M = 8, N = 40, K = 512;
  for (Isa isa : isas) {
    for (DType dt : kQuantizedDTypes) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(dtype_name(dt)));
      // All level bits set (q8_0: bytes 0x80), the f16 scales and mins a small positive number (0x2000 = 2^-7).
      Case c{dt, Tensor::empty({N, K}, dt), {}};
      auto* bytes = static_cast<uint8_t*>(c.w.raw_data());
      const std::size_t block = dtype_size(dt), nblocks = dtype_nbytes(dt, N * K) / block;
      std::vector<int> f16_at;  // byte offsets of the f16 fields in a block
      switch (dt) {
        case DType::Q8_0: case DType::Q4_0: case DType::Q5_0: f16_at = {0}; break;
        case DType::Q6_K: f16_at = {208}; break;
        default: f16_at = {0, 2};  // d and m (q4_1, q5_1) or dmin (q4_k, q5_k)
      }
      for (std::size_t b = 0; b < nblocks; ++b) {
        uint8_t* blk = bytes + b * block;
        std::memset(blk, dt == DType::Q8_0 ? 0x80 : 0xFF, block);
        for (int off : f16_at) blk[off] = 0x00, blk[off + 1] = 0x20;
      }
      c.deq = c.w.to_vector<float>();
      for (float sign : {1.0f, -1.0f}) {
        const std::vector<float> xv(M * K, sign);
        const Activations a = quantize(xv, M, K, dt);
        std::vector<float> y(M * N);
        cpu::quant_gemm(isa, dt, c.w.raw_data(), N, K, M, a.bytes.data(), a.row_size, nullptr, y.data());
        std::vector<double> want, mag;
        reference(c, a.values, M, N, K, nullptr, want, mag);
        EXPECT_TRUE(within_summation_noise(y, want, mag)) << "activations " << sign;
      }
    }
  }
}

// Through ops::linear: a prefill of M rows takes the GEMM (M ≥ quant_gemm_min_rows), each row decoded alone the GEMV;
// both quantize the activations the same way, so the rows agree to summation noise.
TEST(QuantGemm, PrefillRowsEqualEachRowAlone) {
  const auto isas = gemm_isas();
  if (isas.empty()) GTEST_SKIP() << "the quantized GEMM needs AVX2";
  const int64_t N = 48, K = 768;
  for (Isa isa : isas) {
    ScopedIsa scoped(isa);
    for (DType dt : kQuantizedDTypes) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(dtype_name(dt)));
      const Case c = make_case(dt, N, K, 5);
      const int64_t min_rows = cpu::quant_gemm_min_rows(isa, dt);
      ASSERT_FALSE(cpu::use_quant_gemm(isa, dt, min_rows - 1));
      for (int64_t M : {min_rows, int64_t{70}}) {
        ASSERT_TRUE(cpu::use_quant_gemm(isa, dt, M));
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
}

// Without AVX2 there is no quantized GEMM: prefill stays on the GEMV at any M.
TEST(QuantGemm, ScalarNeverTakesTheGemm) {
  for (DType dt : kQuantizedDTypes) EXPECT_FALSE(cpu::use_quant_gemm(Isa::Scalar, dt, 1 << 20)) << dtype_name(dt);
}

}  // namespace
}  // namespace ferry::ops
