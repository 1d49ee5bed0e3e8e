// ggml type table and dequantization (see include/ferry/core/quant.h). Scalar code: every value is computed with
// the same float operations in the same order as ggml's dequantize_row_* (ggml-quants.c) and gguf-py's numpy, so
// results are bit-identical (this file is built without FMA, so nothing is contracted).
#include "ferry/core/quant.h"

#include <array>
#include <cstring>
#include <string>

#include "ferry/core/convert.h"
#include "ferry/core/error.h"

namespace ferry {
namespace {

constexpr int64_t QK_K = 256;

constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::F32, "f32", 1, 4, true},          {GgmlType::F16, "f16", 1, 2, true},
    {GgmlType::Q4_0, "q4_0", 32, 18, true},      {GgmlType::Q4_1, "q4_1", 32, 20, true},
    {GgmlType::Q5_0, "q5_0", 32, 22, true},      {GgmlType::Q5_1, "q5_1", 32, 24, true},
    {GgmlType::Q8_0, "q8_0", 32, 34, true},      {GgmlType::Q8_1, "q8_1", 32, 36, false},
    {GgmlType::Q2_K, "q2_K", QK_K, 84, false},   {GgmlType::Q3_K, "q3_K", QK_K, 110, false},
    {GgmlType::Q4_K, "q4_K", QK_K, 144, true},   {GgmlType::Q5_K, "q5_K", QK_K, 176, true},
    {GgmlType::Q6_K, "q6_K", QK_K, 210, true},   {GgmlType::Q8_K, "q8_K", QK_K, 292, false},
    {GgmlType::IQ2_XXS, "iq2_xxs", QK_K, 66, false}, {GgmlType::IQ2_XS, "iq2_xs", QK_K, 74, false},
    {GgmlType::IQ3_XXS, "iq3_xxs", QK_K, 98, false}, {GgmlType::IQ1_S, "iq1_s", QK_K, 50, false},
    {GgmlType::IQ4_NL, "iq4_nl", 32, 18, false},     {GgmlType::IQ3_S, "iq3_s", QK_K, 110, false},
    {GgmlType::IQ2_S, "iq2_s", QK_K, 82, false},     {GgmlType::IQ4_XS, "iq4_xs", QK_K, 136, false},
    {GgmlType::I8, "i8", 1, 1, false},           {GgmlType::I16, "i16", 1, 2, false},
    {GgmlType::I32, "i32", 1, 4, false},         {GgmlType::I64, "i64", 1, 8, false},
    {GgmlType::F64, "f64", 1, 8, false},         {GgmlType::IQ1_M, "iq1_m", QK_K, 56, false},
    {GgmlType::BF16, "bf16", 1, 2, true},        {GgmlType::TQ1_0, "tq1_0", QK_K, 54, false},
    {GgmlType::TQ2_0, "tq2_0", QK_K, 66, false}, {GgmlType::MXFP4, "mxfp4", 32, 17, false},
};

inline float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

void q4_0(const uint8_t* b, float* y) {
  const float d = f16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0x0F) - 8);
    y[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

void q4_1(const uint8_t* b, float* y) {
  const float d = f16(b), m = f16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(qs[j] & 0x0F) + m;
    y[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

// The 5-bit values of a Q5 block: low nibble from qs, 5th bit from qh's bit i.
inline int q5(const uint8_t* qs, uint32_t qh, int i) {
  const int low = i < 16 ? (qs[i] & 0x0F) : (qs[i - 16] >> 4);
  return low | static_cast<int>(((qh >> i) & 1u) << 4);
}

void q5_0(const uint8_t* b, float* y) {
  const float d = f16(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(q5(b + 6, qh, i) - 16);
}

void q5_1(const uint8_t* b, float* y) {
  const float d = f16(b), m = f16(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(q5(b + 8, qh, i)) + m;
}

void q8_0(const uint8_t* b, float* y) {
  const float d = f16(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int i = 0; i < 32; ++i) y[i] = static_cast<float>(qs[i]) * d;
}

// Q4_K and Q5_K: eight sub-blocks of 32 with a 6-bit scale and min each; Q5_K adds a 5th bit per value from qh
// (bit j of qh[l] for sub-block j), and its nibbles start 32 bytes later.
template <bool kFifthBit>
void qk_k(const uint8_t* b, float* y) {
  const float d = f16(b), dmin = f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (kFifthBit ? 48 : 16);
  for (int sb = 0; sb < 8; ++sb) {
    int sc, m;
    scale_min_k4(sb, scales, sc, m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    const uint8_t* q = qs + 32 * (sb / 2);
    const int shift = 4 * (sb % 2);
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> shift) & 0x0F;
      if constexpr (kFifthBit) v |= ((qh[l] >> sb) & 1) << 4;
      y[32 * sb + l] = d1 * static_cast<float>(v) - m1;
    }
  }
}

void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16(b + 208);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* l8 = ql + 64 * half;
    const uint8_t* h8 = qh + 32 * half;
    float* out = y + 128 * half;
    const int8_t* s = sc + 8 * half;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((l8[l] & 0x0F) | (((h8[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((l8[l + 32] & 0x0F) | (((h8[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((l8[l] >> 4) | (((h8[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((l8[l + 32] >> 4) | (((h8[l] >> 6) & 3) << 4)) - 32;
      out[l] = d * static_cast<float>(s[is]) * static_cast<float>(q1);
      out[l + 32] = d * static_cast<float>(s[is + 2]) * static_cast<float>(q2);
      out[l + 64] = d * static_cast<float>(s[is + 4]) * static_cast<float>(q3);
      out[l + 96] = d * static_cast<float>(s[is + 6]) * static_cast<float>(q4);
    }
  }
}

}  // namespace

void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) noexcept {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) noexcept {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return t;
  return std::nullopt;
}

GgmlTypeInfo ggml_type_info(GgmlType type) noexcept { return *ggml_type_info(static_cast<uint32_t>(type)); }

std::optional<uint64_t> ggml_row_bytes(GgmlType type, uint64_t n) noexcept {
  const GgmlTypeInfo t = ggml_type_info(type);
  if (n % static_cast<uint64_t>(t.block_size) != 0) return std::nullopt;
  const uint64_t blocks = n / static_cast<uint64_t>(t.block_size);
  if (blocks > UINT64_MAX / t.block_bytes) return std::nullopt;
  return blocks * t.block_bytes;
}

void dequantize(GgmlType type, const void* src, float* dst, int64_t n) {
  const GgmlTypeInfo t = ggml_type_info(type);
  if (n < 0 || n % t.block_size != 0)
    throw Error(std::to_string(n) + " elements are not a whole number of " + std::string(t.name) + " blocks of " +
                    std::to_string(t.block_size),
                "dequantize");
  const auto* p = static_cast<const uint8_t*>(src);
  const int64_t blocks = n / t.block_size;
  void (*block)(const uint8_t*, float*) = nullptr;
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, static_cast<std::size_t>(n) * 4); return;
    case GgmlType::F16: convert(src, DType::F16, dst, DType::F32, static_cast<std::size_t>(n)); return;
    case GgmlType::BF16: convert(src, DType::BF16, dst, DType::F32, static_cast<std::size_t>(n)); return;
    case GgmlType::Q4_0: block = q4_0; break;
    case GgmlType::Q4_1: block = q4_1; break;
    case GgmlType::Q5_0: block = q5_0; break;
    case GgmlType::Q5_1: block = q5_1; break;
    case GgmlType::Q8_0: block = q8_0; break;
    case GgmlType::Q4_K: block = qk_k<false>; break;
    case GgmlType::Q5_K: block = qk_k<true>; break;
    case GgmlType::Q6_K: block = q6_k; break;
    default:
      throw Error("ggml type " + std::string(t.name) + " cannot be dequantized by ferry", "dequantize",
                  "ferry reads f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K and q6_K");
  }
  for (int64_t i = 0; i < blocks; ++i) block(p + static_cast<std::size_t>(i) * t.block_bytes, dst + i * t.block_size);
}

}  // namespace ferry
