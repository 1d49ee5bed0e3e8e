// Quantized-weight GEMV: the scalar reference kernels, the choice of ISA and the multi-threaded driver (see
// quant_kernels.h). The scalar kernel decodes each 32-element weight group into integer levels and (a, c) pairs
// and is what the SIMD kernels are tested against.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ferry/core/convert.h"
#include "ferry/core/quant.h"
#include "ferry/core/thread_pool.h"
#include "quant_kernels.h"

namespace ferry::ops::cpu {
namespace scalar {
namespace {

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Weight group g (elements 32g .. 32g + 31) of a row: value i = a[i / 16] · q[i] + c[i / 16].
struct Group {
  int q[32];
  float a[2], c[2];
};

void set_ac(Group& out, float a, float c) {
  out.a[0] = out.a[1] = a;
  out.c[0] = out.c[1] = c;
}

void decode_group(DType wt, const uint8_t* row, int64_t g, Group& out) {
  const int64_t bs = dtype_block_size(wt);
  const uint8_t* b = row + static_cast<std::size_t>(g * 32 / bs) * dtype_size(wt);
  const int sub = static_cast<int>((g * 32) % bs / 32);
  switch (wt) {
    case DType::Q8_0:
      for (int i = 0; i < 32; ++i) out.q[i] = static_cast<int8_t>(b[2 + i]);
      return set_ac(out, f16_at(b), 0.0f);
    case DType::Q4_0:
    case DType::Q4_1: {
      const uint8_t* qs = b + (wt == DType::Q4_0 ? 2 : 4);
      for (int i = 0; i < 16; ++i) out.q[i] = qs[i] & 0x0F, out.q[i + 16] = qs[i] >> 4;
      const float d = f16_at(b);
      return set_ac(out, d, wt == DType::Q4_0 ? -8.0f * d : f16_at(b + 2));
    }
    case DType::Q5_0:
    case DType::Q5_1: {
      const int off = wt == DType::Q5_0 ? 2 : 4;
      uint32_t qh;
      std::memcpy(&qh, b + off, 4);
      const uint8_t* qs = b + off + 4;
      for (int i = 0; i < 16; ++i) {
        out.q[i] = (qs[i] & 0x0F) | static_cast<int>(((qh >> i) & 1u) << 4);
        out.q[i + 16] = (qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1u) << 4);
      }
      const float d = f16_at(b);
      return set_ac(out, d, wt == DType::Q5_0 ? -16.0f * d : f16_at(b + 2));
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      int s, m;
      scale_min_k4(sub, b + 4, s, m);
      const bool five = wt == DType::Q5_K;
      const uint8_t* qs = b + (five ? 48 : 16) + 32 * (sub / 2);
      for (int l = 0; l < 32; ++l) {
        out.q[l] = (qs[l] >> (4 * (sub % 2))) & 0x0F;
        if (five) out.q[l] |= ((b[16 + l] >> sub) & 1) << 4;
      }
      return set_ac(out, f16_at(b) * static_cast<float>(s), -f16_at(b + 2) * static_cast<float>(m));
    }
    case DType::Q6_K: {
      const int half = sub / 4, gg = sub % 4;
      const uint8_t* l8 = b + 64 * half + 32 * (gg & 1);
      const uint8_t* h8 = b + 128 + 32 * half;
      for (int l = 0; l < 32; ++l)
        out.q[l] = ((l8[l] >> (gg < 2 ? 0 : 4)) & 0x0F) | (((h8[l] >> (2 * gg)) & 3) << 4);
      const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
      const float d = f16_at(b + 208);
      for (int h = 0; h < 2; ++h) {
        out.a[h] = d * static_cast<float>(scales[8 * half + 2 * gg + h]);
        out.c[h] = -32.0f * out.a[h];
      }
      return;
    }
    default: return;
  }
}

}  // namespace

namespace {

float absmax(const float* v, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
  return amax;
}

// n values times id, rounded to nearest even, into q; returns the sum of the levels.
int round_levels(const float* v, int n, float id, int8_t* q) {
  int s = 0;
  for (int i = 0; i < n; ++i) s += q[i] = static_cast<int8_t>(std::nearbyint(v[i] * id));
  return s;
}

}  // namespace

void quantize_x(const float* x, int64_t K, QBlock8* out) {
  for (int64_t g = 0; g < K / 32; ++g) {
    const float* v = x + 32 * g;
    const float d = absmax(v, 32) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    QBlock8& b = out[g];
    b.d = d;
    b.dsum[0] = d * static_cast<float>(round_levels(v, 16, id, b.q));
    b.dsum[1] = d * static_cast<float>(round_levels(v + 16, 16, id, b.q + 16));
    b.dsum_all = b.dsum[0] + b.dsum[1];
  }
}

void quantize_x_k(const float* x, int64_t K, QBlockK* out) {
  for (int64_t g = 0; g < K / 256; ++g) {
    const float* v = x + 256 * g;
    const float d = absmax(v, 256) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    QBlockK& b = out[g];
    b.d = d;
    for (int j = 0; j < 16; ++j) b.bsum[j] = static_cast<int16_t>(round_levels(v + 16 * j, 16, id, b.q + 16 * j));
  }
}

void qgemv(DType wt, const void* w, int64_t K, const void* xq, int M, const float* bias, float* y, int64_t ldy,
           int64_t n0, int64_t n1) {
  const int64_t groups = K / 32;
  const bool kblocks = uses_kblocks(wt);
  const auto* x8 = static_cast<const QBlock8*>(xq);
  const auto* xk = static_cast<const QBlockK*>(xq);
  const std::size_t row_bytes = dtype_nbytes(wt, K);
  Group grp;
  for (int64_t n = n0; n < n1; ++n) {
    const auto* row = static_cast<const uint8_t*>(w) + static_cast<std::size_t>(n) * row_bytes;
    float acc[4] = {};
    for (int64_t g = 0; g < groups; ++g) {
      decode_group(wt, row, g, grp);
      for (int m = 0; m < M; ++m) {
        // The activation block of group g: its levels, scale and the sums of each half's levels (times d for
        // QBlock8, whose dsum fields hold them scaled).
        const int8_t* q;
        float d, sum0, sum1;
        if (kblocks) {
          const QBlockK& b = xk[m * (K / 256) + g / 8];
          q = b.q + 32 * (g % 8), d = b.d;
          sum0 = d * static_cast<float>(b.bsum[2 * (g % 8)]), sum1 = d * static_cast<float>(b.bsum[2 * (g % 8) + 1]);
        } else {
          const QBlock8& b = x8[m * groups + g];
          q = b.q, d = b.d, sum0 = b.dsum[0], sum1 = b.dsum[1];
        }
        int dot[2] = {0, 0};
        for (int i = 0; i < 32; ++i) dot[i / 16] += grp.q[i] * q[i];
        acc[m] += d * (grp.a[0] * static_cast<float>(dot[0]) + grp.a[1] * static_cast<float>(dot[1])) +
                  (grp.c[0] * sum0 + grp.c[1] * sum1);
      }
    }
    for (int m = 0; m < M; ++m) y[m * ldy + n] = bias ? acc[m] + bias[n] : acc[m];
  }
}

}  // namespace scalar

void pair_x(const QBlock8* x, int64_t groups, QPair8* out) {
  static constexpr QBlock8 kZero{};
  for (int64_t p = 0; p < (groups + 1) / 2; ++p) {
    const QBlock8& a = x[2 * p];
    const QBlock8& b = 2 * p + 1 < groups ? x[2 * p + 1] : kZero;
    QPair8& o = out[p];
    std::memcpy(o.q, a.q, 16), std::memcpy(o.q + 16, b.q, 16);
    std::memcpy(o.q + 32, a.q + 16, 16), std::memcpy(o.q + 48, b.q + 16, 16);
    for (int i = 0; i < 4; ++i) o.d[i] = a.d, o.d[4 + i] = b.d, o.dsum[i] = o.dsum[4 + i] = 0.0f;
    o.dsum[0] = a.dsum_all, o.dsum[4] = b.dsum_all;
  }
}

const QuantKernels& quant_kernels(Isa isa) {
  static const QuantKernels scalar_kernels{scalar::quantize_x, scalar::quantize_x_k, scalar::qgemv, 4, false};
#if FERRY_X86_KERNELS
  static const QuantKernels avx2_kernels{avx2::quantize_x, avx2::quantize_x_k, avx2::qgemv, 4, true};
  static const QuantKernels avx512_kernels{avx2::quantize_x, avx2::quantize_x_k, avx512::qgemv, 8, true};
  if (isa >= Isa::AVX2) return isa >= Isa::AVX512 ? avx512_kernels : avx2_kernels;
#endif
  (void)isa;
  return scalar_kernels;
}

void quant_gemv(Isa isa, DType wt, const void* w, int64_t N, int64_t K, int64_t M, const float* x, const float* bias,
                float* y, bool allow_gemm) {
  const auto& kern = quant_kernels(isa);
  const bool gemm = allow_gemm && use_quant_gemm(isa, wt, M);
  // Each activation row quantized once, in the layout the weight type takes, and for the SIMD GEMV of q4_0 ... q5_1
  // rearranged in pairs of groups by the same task.
  const bool kblocks = uses_kblocks(wt), paired = !gemm && kern.pairs && uses_pairs(wt);
  const std::size_t row_size = kblocks ? static_cast<std::size_t>(K / 256) * sizeof(QBlockK)
                                       : static_cast<std::size_t>(K / 32) * sizeof(QBlock8);
  const std::size_t pair_row_size = static_cast<std::size_t>((K / 32 + 1) / 2) * sizeof(QPair8);
  std::vector<uint8_t> xq(static_cast<std::size_t>(M) * row_size);
  std::vector<uint8_t> xp(paired ? static_cast<std::size_t>(M) * pair_row_size : 0);
  parallel_for(0, M, std::max<int64_t>(1, 4096 / K), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      uint8_t* dst = xq.data() + static_cast<std::size_t>(m) * row_size;
      if (kblocks) kern.quantize_x_k(x + m * K, K, reinterpret_cast<QBlockK*>(dst));
      else kern.quantize_x(x + m * K, K, reinterpret_cast<QBlock8*>(dst));
      if (paired)
        pair_x(reinterpret_cast<const QBlock8*>(dst), K / 32,
               reinterpret_cast<QPair8*>(xp.data() + static_cast<std::size_t>(m) * pair_row_size));
    }
  });
  if (gemm) return quant_gemm(quant_gemm_isa(isa, wt, M), wt, w, N, K, M, xq.data(), row_size, bias, y);
  const uint8_t* xrows = paired ? xp.data() : xq.data();
  const std::size_t xrow_size = paired ? pair_row_size : row_size;
  // Activation rows go in tiles of kQuantRowTile (their blocks stay in L2 while every weight row streams past);
  // weight rows in groups of 8, chunks of at least ~64 KiB of weights; within a group each activation row of the
  // tile is served, max_rows (4 or 8) at a time, while the weight rows are in L1/L2.
  constexpr int64_t kGroup = 8;
  const auto row_bytes = static_cast<int64_t>(std::max<std::size_t>(1, dtype_nbytes(wt, K)));
  const int64_t grain = std::max<int64_t>(1, (int64_t{64} << 10) / (row_bytes * kGroup));
  for (int64_t t0 = 0; t0 < M; t0 += kQuantRowTile) {
    const int64_t t1 = std::min(M, t0 + kQuantRowTile);
    parallel_for(0, (N + kGroup - 1) / kGroup, grain, [&](int64_t g0, int64_t g1) {
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t n0 = g * kGroup, n1 = std::min(n0 + kGroup, N);
        for (int64_t m = t0; m < t1; m += kern.max_rows)
          kern.gemv(wt, w, K, xrows + static_cast<std::size_t>(m) * xrow_size,
                    static_cast<int>(std::min<int64_t>(kern.max_rows, t1 - m)), bias, y + m * N, N, n0, n1);
      }
    });
  }
}

}  // namespace ferry::ops::cpu
