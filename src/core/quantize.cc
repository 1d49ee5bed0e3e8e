// f32 -> ggml block quantization (see include/ferry/core/quant.h). The 32-element types repeat ggml's reference
// quantizers operation for operation (so ferry's Q8_0 ... Q5_1 bytes equal ggml's and gguf-py's); the K-quants
// use ferry's least-squares quantizer described in quant.h. Built without FMA, like quant.cc, so the float
// operations are exactly the ones written.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "ferry/core/convert.h"
#include "ferry/core/error.h"
#include "ferry/core/quant.h"

namespace ferry {
namespace {

constexpr int QK_K = 256;

void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}
float f16_round(float v) { return f16_to_f32(f32_to_f16(v)); }

// The element of largest magnitude, with its sign (ggml's "max" for the symmetric types).
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j)
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
  return max;
}

void q8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(b, d);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
}

void q4_0(const float* x, uint8_t* b) {
  const float d = signed_absmax(x, 32) / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(b, d);
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
    const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
    b[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void min_max(const float* x, int n, float& min, float& max) {
  min = max = x[0];
  for (int j = 1; j < n; ++j) min = std::min(min, x[j]), max = std::max(max, x[j]);
}

void q4_1(const float* x, uint8_t* b) {
  float min, max;
  min_max(x, 32, min, max);
  const float d = (max - min) / 15.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(b, d);
  put_f16(b + 2, min);
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f)));
    const int hi = std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - min) * id + 0.5f)));
    b[4 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// Q5_0 / Q5_1 share the packing: low nibbles as Q4, the 5th bits in a little-endian u32.
void pack_q5(const int* q, uint8_t* qh_out, uint8_t* qs) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
    qh |= static_cast<uint32_t>((q[j] & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((q[j + 16] & 0x10) >> 4) << (j + 16);
  }
  std::memcpy(qh_out, &qh, 4);
}

void q5_0(const float* x, uint8_t* b) {
  const float d = signed_absmax(x, 32) / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(b, d);
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
  pack_q5(q, b + 2, b + 6);
}

void q5_1(const float* x, uint8_t* b) {
  float min, max;
  min_max(x, 32, min, max);
  const float d = (max - min) / 31.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(b, d);
  put_f16(b + 2, min);
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
  pack_q5(q, b + 4, b + 8);
}

// ---- K-quants -------------------------------------------------------------------------------------------------

// Fits x ≈ s·q − m (q in [0, nmax], m ≥ 0) for one sub-block: start from the range, then alternate rounding and
// the least-squares (s, m) for those levels, keeping the best squared error.
void fit_scale_min(const float* x, int n, int nmax, float& s_out, float& m_out) {
  float lo, hi;
  min_max(x, n, lo, hi);
  lo = std::min(lo, 0.0f);
  float s = (hi - lo) / static_cast<float>(nmax), m = -lo;
  s_out = s, m_out = m;
  if (s == 0.0f) return;
  auto error = [&](float sc, float mn) {
    double e = 0;
    for (int i = 0; i < n; ++i) {
      const float q = std::clamp(std::nearbyint((x[i] + mn) / sc), 0.0f, static_cast<float>(nmax));
      const double r = static_cast<double>(sc * q - mn - x[i]);
      e += r * r;
    }
    return e;
  };
  double best = error(s, m);
  for (int it = 0; it < 4; ++it) {
    double sq = 0, sq2 = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      const double q = std::clamp(std::nearbyint((x[i] + m) / s), 0.0f, static_cast<float>(nmax));
      sq += q, sq2 += q * q, sx += x[i], sqx += q * x[i];
    }
    const double det = n * sq2 - sq * sq;
    if (det <= 0) break;
    double ns = (n * sqx - sq * sx) / det, nb = (sq2 * sx - sq * sqx) / det;  // x ≈ ns·q + nb
    if (nb > 0) nb = 0, ns = sq2 > 0 ? sqx / sq2 : ns;                        // the min stays ≤ 0
    if (!(ns > 0)) break;
    const double e = error(static_cast<float>(ns), static_cast<float>(-nb));
    if (e >= best) break;
    best = e, s = static_cast<float>(ns), m = static_cast<float>(-nb);
  }
  s_out = s, m_out = m;
}

// The 12 bytes holding eight 6-bit scales and mins (the inverse of quant.cc's scale_min_k4).
void pack_scales_k4(const int* sc, const int* mn, uint8_t* q) {
  std::memset(q, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      q[j] |= static_cast<uint8_t>(sc[j] & 63);
      q[j + 4] |= static_cast<uint8_t>(mn[j] & 63);
    } else {
      q[j + 4] = static_cast<uint8_t>((sc[j] & 0x0F) | ((mn[j] & 0x0F) << 4));
      q[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      q[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
    }
  }
}

// Q4_K (nmax 15) and Q5_K (nmax 31): eight sub-blocks of 32 with a 6-bit scale and min each.
template <bool kFifthBit>
void qk_k(const float* x, uint8_t* b) {
  constexpr int nmax = kFifthBit ? 31 : 15;
  float s[8], m[8], smax = 0.0f, mmax = 0.0f;
  for (int j = 0; j < 8; ++j) {
    fit_scale_min(x + 32 * j, 32, nmax, s[j], m[j]);
    smax = std::max(smax, s[j]), mmax = std::max(mmax, m[j]);
  }
  const float d = f16_round(smax / 63.0f), dmin = f16_round(mmax / 63.0f);
  put_f16(b, d);
  put_f16(b + 2, dmin);
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = d > 0 ? std::clamp(static_cast<int>(std::nearbyint(s[j] / d)), 0, 63) : 0;
    mn[j] = dmin > 0 ? std::clamp(static_cast<int>(std::nearbyint(m[j] / dmin)), 0, 63) : 0;
  }
  pack_scales_k4(sc, mn, b + 4);
  uint8_t* qh = b + 16;
  uint8_t* qs = b + (kFifthBit ? 48 : 16);
  if constexpr (kFifthBit) std::memset(qh, 0, 32);
  for (int j = 0; j < 8; ++j) {
    const float ds = d * static_cast<float>(sc[j]), dm = dmin * static_cast<float>(mn[j]);
    for (int l = 0; l < 32; ++l) {
      const int q = ds > 0 ? std::clamp(static_cast<int>(std::nearbyint((x[32 * j + l] + dm) / ds)), 0, nmax) : 0;
      uint8_t& byte = qs[32 * (j / 2) + l];
      if (j % 2 == 0) byte = static_cast<uint8_t>(q & 0x0F);
      else byte |= static_cast<uint8_t>((q & 0x0F) << 4);
      if constexpr (kFifthBit) qh[l] |= static_cast<uint8_t>(((q >> 4) & 1) << j);
    }
  }
}

// Q6_K: sixteen sub-blocks of 16, levels −32..31, an int8 scale each against one f16 super-block scale.
void q6_k(const float* x, uint8_t* b) {
  float s[16], amax = 0.0f;
  for (int j = 0; j < 16; ++j) {
    const float* v = x + 16 * j;
    float sc = signed_absmax(v, 16) / -32.0f;
    // Least-squares refinement of the scale for the rounded levels.
    for (int it = 0; it < 2 && sc != 0.0f; ++it) {
      double qx = 0, qq = 0;
      for (int i = 0; i < 16; ++i) {
        const double q = std::clamp(std::nearbyint(v[i] / sc), -32.0f, 31.0f);
        qx += q * v[i], qq += q * q;
      }
      if (qq > 0) sc = static_cast<float>(qx / qq);
    }
    s[j] = sc, amax = std::max(amax, std::fabs(sc));
  }
  const float d = f16_round(amax / 127.0f);
  int8_t sc[16];
  for (int j = 0; j < 16; ++j)
    sc[j] = static_cast<int8_t>(d > 0 ? std::clamp(static_cast<int>(std::nearbyint(s[j] / d)), -127, 127) : 0);
  int q[QK_K];
  for (int e = 0; e < QK_K; ++e) {
    const float ds = d * static_cast<float>(sc[e / 16]);
    q[e] = (ds != 0.0f ? std::clamp(static_cast<int>(std::nearbyint(x[e] / ds)), -32, 31) : 0) + 32;
  }
  uint8_t* ql = b;
  uint8_t* qh = b + 128;
  for (int half = 0; half < 2; ++half) {
    const int* e = q + 128 * half;
    for (int l = 0; l < 32; ++l) {
      const int q1 = e[l], q2 = e[l + 32], q3 = e[l + 64], q4 = e[l + 96];
      ql[64 * half + l] = static_cast<uint8_t>((q1 & 0x0F) | ((q3 & 0x0F) << 4));
      ql[64 * half + l + 32] = static_cast<uint8_t>((q2 & 0x0F) | ((q4 & 0x0F) << 4));
      qh[32 * half + l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  }
  std::memcpy(b + 192, sc, 16);
  put_f16(b + 208, d);
}

}  // namespace

void quantize(GgmlType type, const float* src, void* dst, int64_t n) {
  const GgmlTypeInfo t = ggml_type_info(type);
  if (n < 0 || n % t.block_size != 0)
    throw Error(std::to_string(n) + " elements are not a whole number of " + std::string(t.name) + " blocks of " +
                    std::to_string(t.block_size),
                "quantize");
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(src[i]))
      throw Error("cannot quantize a non-finite value (" + std::to_string(src[i]) + " at element " +
                      std::to_string(i) + ") to " + std::string(t.name),
                  "quantize", "check the checkpoint: its weights hold inf or NaN");
  void (*block)(const float*, uint8_t*) = nullptr;
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, static_cast<std::size_t>(n) * 4); return;
    case GgmlType::F16: convert(src, DType::F32, dst, DType::F16, static_cast<std::size_t>(n)); return;
    case GgmlType::BF16: convert(src, DType::F32, dst, DType::BF16, static_cast<std::size_t>(n)); return;
    case GgmlType::Q8_0: block = q8_0; break;
    case GgmlType::Q4_0: block = q4_0; break;
    case GgmlType::Q4_1: block = q4_1; break;
    case GgmlType::Q5_0: block = q5_0; break;
    case GgmlType::Q5_1: block = q5_1; break;
    case GgmlType::Q4_K: block = qk_k<false>; break;
    case GgmlType::Q5_K: block = qk_k<true>; break;
    case GgmlType::Q6_K: block = q6_k; break;
    default:
      throw Error("ferry cannot quantize to ggml type " + std::string(t.name), "quantize",
                  "use one of q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k");
  }
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n / t.block_size; ++i)
    block(src + i * t.block_size, out + static_cast<std::size_t>(i) * t.block_bytes);
}

namespace {
constexpr std::pair<DType, GgmlType> kDTypeGgml[] = {
    {DType::F32, GgmlType::F32},   {DType::F16, GgmlType::F16},   {DType::BF16, GgmlType::BF16},
    {DType::Q8_0, GgmlType::Q8_0}, {DType::Q4_0, GgmlType::Q4_0}, {DType::Q4_1, GgmlType::Q4_1},
    {DType::Q5_0, GgmlType::Q5_0}, {DType::Q5_1, GgmlType::Q5_1}, {DType::Q4_K, GgmlType::Q4_K},
    {DType::Q5_K, GgmlType::Q5_K}, {DType::Q6_K, GgmlType::Q6_K},
};
}  // namespace

std::optional<GgmlType> ggml_type_of(DType t) noexcept {
  for (const auto& [d, g] : kDTypeGgml)
    if (d == t) return g;
  return std::nullopt;
}

std::optional<DType> dtype_of_ggml(GgmlType t) noexcept {
  for (const auto& [d, g] : kDTypeGgml)
    if (g == t) return d;
  return std::nullopt;
}

}  // namespace ferry
