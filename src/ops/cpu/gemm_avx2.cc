// AVX2/FMA GEMM microkernel (see linear_kernels.h): a 6 × 16 block of outputs held in twelve ymm accumulators,
// fed per k by two weight vectors and six broadcast activations (12 FMAs for 8 loads, the Haswell-era BLIS
// shape; 15 of the 16 ymm registers live).
#include "linear_kernels.h"
#include <algorithm>

#include "simd_avx2.h"
#include "to_f32.h"

namespace ferry::ops::cpu::avx2 {

void micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr, bool accumulate,
           const float* bias) {
  static_assert(kMR == 6 && kNR == 16, "the AVX2 microkernel is written for 6 x 16");
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  // The output tile is read (or written) only after the k loop: start fetching its lines now.
  for (int i = 0; i < mr; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + nr - 1), _MM_HINT_T0);
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * kNR), b1 = _mm256_loadu_ps(b + k * kNR + 8);
    const float* ak = a + k * kMR;
    __m256 av = _mm256_broadcast_ss(ak + 0);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(ak + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(ak + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(ak + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(ak + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(ak + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
  }
  const __m256 acc[kMR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (nr == kNR) {
    __m256 base0 = _mm256_setzero_ps(), base1 = base0;
    if (!accumulate && bias) base0 = _mm256_loadu_ps(bias), base1 = _mm256_loadu_ps(bias + 8);
    for (int i = 0; i < mr; ++i) {
      float* ci = c + i * ldc;
      __m256 o0 = accumulate ? _mm256_loadu_ps(ci) : base0, o1 = accumulate ? _mm256_loadu_ps(ci + 8) : base1;
      _mm256_storeu_ps(ci, _mm256_add_ps(o0, acc[i][0]));
      _mm256_storeu_ps(ci + 8, _mm256_add_ps(o1, acc[i][1]));
    }
    return;
  }
  alignas(32) float tile[kMR][kNR];
  for (int i = 0; i < kMR; ++i) _mm256_store_ps(tile[i], acc[i][0]), _mm256_store_ps(tile[i] + 8, acc[i][1]);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) {
      float& out = c[i * ldc + j];
      out = (accumulate ? out : bias ? bias[j] : 0.0f) + tile[i][j];
    }
}

}  // namespace ferry::ops::cpu::avx2

namespace ferry::ops::cpu::avx2 {
namespace {

// In-register transpose of an 8 × 8 block of floats (rows r[0..7] become columns).
inline void transpose8(__m256 r[8]) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20), r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20), r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31), r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31), r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Eight weight rows at a time: convert 8 × 8 in registers, transpose, store 8 contiguous columns per k.
template <DType T>
void pack_panel_t(const void* w, int64_t K, int64_t n0, int rows, int64_t k0, int64_t kc, float* panel) {
  const std::size_t esize = dtype_size(T);
  for (int j0 = 0; j0 < kNR; j0 += 8) {
    const int here = std::max(0, std::min(8, rows - j0));
    if (here == 0) {
      for (int64_t k = 0; k < kc; ++k) _mm256_storeu_ps(panel + k * kNR + j0, _mm256_setzero_ps());
      continue;
    }
    const char* r[8];  // rows past `here` alias the last real row and are never loaded
    for (int j = 0; j < 8; ++j)
      r[j] = static_cast<const char*>(w) + (static_cast<std::size_t>(n0 + j0 + std::min(j, here - 1)) * K + k0) * esize;
    int64_t k = 0;
    if (here == 8) {
      for (; k + 8 <= kc; k += 8) {
        __m256 v[8];
        FERRY_UNROLL
        for (int j = 0; j < 8; ++j) v[j] = load8<T>(r[j], k);
        transpose8(v);
        FERRY_UNROLL
        for (int i = 0; i < 8; ++i) _mm256_storeu_ps(panel + (k + i) * kNR + j0, v[i]);
      }
    }
    for (; k < kc; ++k)
      for (int j = 0; j < 8; ++j) panel[k * kNR + j0 + j] = j < here ? load_f32(T, r[j], k) : 0.0f;
  }
}

}  // namespace

void pack_panel(DType wt, const void* w, int64_t K, int64_t n0, int rows, int64_t k0, int64_t kc, float* panel) {
  switch (wt) {
    case DType::F32: return pack_panel_t<DType::F32>(w, K, n0, rows, k0, kc, panel);
    case DType::F16: return pack_panel_t<DType::F16>(w, K, n0, rows, k0, kc, panel);
    case DType::BF16: return pack_panel_t<DType::BF16>(w, K, n0, rows, k0, kc, panel);
    case DType::F8_E4M3FN: return pack_panel_t<DType::F8_E4M3FN>(w, K, n0, rows, k0, kc, panel);
    case DType::F8_E5M2: return pack_panel_t<DType::F8_E5M2>(w, K, n0, rows, k0, kc, panel);
    default: return scalar::pack_panel(wt, w, K, n0, rows, k0, kc, panel);
  }
}

}  // namespace ferry::ops::cpu::avx2
