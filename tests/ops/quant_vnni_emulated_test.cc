// The AVX-512 VNNI quantized GEMV's code with its VNNI instructions emulated (quant_vnni_emulated_avx2.cc), against
// the scalar GEMV on the same quantized activations: every type, 1-8 activation rows per call (the AVX-512 kernel
// serves up to 8), rows with an odd number of 32-element groups (the q4/q5 pairs end in a zero group), bias. Its
// arithmetic is the scalar kernel's up to f32 summation order. Runs on any CPU with AVX2, so the AVX-512 path's
// loops are tested where no AVX-512 CPU is at hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ferry/core/cpu_features.h"
#include "ferry/core/quant.h"
#include "op_test_util.h"
#include "ops/cpu/quant_kernels.h"

#if FERRY_X86_KERNELS
namespace ferry::ops::cpu::vnni_emulated {
void qgemv(DType wt, const void* w, int64_t K, const void* xq, int M, const float* bias, float* y, int64_t ldy,
           int64_t n0, int64_t n1);
}  // namespace ferry::ops::cpu::vnni_emulated

namespace ferry::ops {
namespace {

TEST(QuantGemvVnniEmulated, EveryTypeRowCountAndTailMatchesTheScalarKernel) {
  if (!cpu_supports(Isa::AVX2)) GTEST_SKIP() << "no AVX2";
  const int64_t N = 13;
  constexpr int kMaxRows = 8;
  for (DType dt : kQuantizedDTypes) {
    const bool kblocks = cpu::uses_kblocks(dt);
    for (int64_t K : kblocks ? std::vector<int64_t>{256, 768} : std::vector<int64_t>{32, 96, 544, 1024}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " K " + std::to_string(K));
      const Tensor w = optest::random_tensor({N, K}, DType::F32, 3).to(dt);
      const auto x = optest::random_floats(kMaxRows * K, 5, -2.0f, 2.0f);
      const auto bias = optest::random_floats(N, 6);
      const std::size_t row = kblocks ? K / 256 * sizeof(cpu::QBlockK) : K / 32 * sizeof(cpu::QBlock8);
      std::vector<uint8_t> xq(row * kMaxRows);
      for (int m = 0; m < kMaxRows; ++m) {
        if (kblocks) cpu::scalar::quantize_x_k(x.data() + m * K, K, reinterpret_cast<cpu::QBlockK*>(&xq[m * row]));
        else cpu::scalar::quantize_x(x.data() + m * K, K, reinterpret_cast<cpu::QBlock8*>(&xq[m * row]));
      }
      // The SIMD kernels take the 4/5-bit 32-element types' activations in pairs.
      std::vector<uint8_t> xs = xq;
      std::size_t srow = row;
      if (cpu::uses_pairs(dt)) {
        srow = static_cast<std::size_t>((K / 32 + 1) / 2) * sizeof(cpu::QPair8);
        xs.resize(srow * kMaxRows);
        for (int m = 0; m < kMaxRows; ++m)
          cpu::pair_x(reinterpret_cast<const cpu::QBlock8*>(&xq[m * row]), K / 32,
                      reinterpret_cast<cpu::QPair8*>(&xs[m * srow]));
      }
      for (int M = 1; M <= kMaxRows; ++M) {
        SCOPED_TRACE("rows " + std::to_string(M));
        std::vector<float> want(static_cast<std::size_t>(N * M)), got(want.size());
        for (int m0 = 0; m0 < M; m0 += 4)  // the scalar kernel serves 4 rows a call
          cpu::scalar::qgemv(dt, w.raw_data(), K, &xq[m0 * row], std::min(4, M - m0), bias.data(), &want[m0 * N], N,
                             0, N);
        cpu::vnni_emulated::qgemv(dt, w.raw_data(), K, xs.data(), M, bias.data(), got.data(), N, 0, N);
        EXPECT_TRUE(optest::all_close(got, want, 1e-5, 1e-4));
      }
    }
  }
}

}  // namespace
}  // namespace ferry::ops
#endif  // FERRY_X86_KERNELS
