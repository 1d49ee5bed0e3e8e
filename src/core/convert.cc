// Exact dtype conversions (see include/ferry/core/convert.h).
//
// Every float format is described by (exponent bits, mantissa bits, bias, has inf, NaN pattern); encode_float
// rounds an exact double to it once, ties to even, so every conversion between float types is a single
// correctly rounded step (all of f16/bf16/f32/fp8 are exactly representable in a double). Fast paths: fp8 and
// f16 decode by table, f32 <-> bf16 by bit arithmetic, and f16/bf16 <-> f32 with F16C/AVX2 (convert_avx2.cc).
#include "ferry/core/convert.h"

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "convert_kernels.h"
#include "ferry/core/cpu_features.h"
#include "ferry/core/error.h"
#include "ferry/core/quant.h"
#include "ferry/core/thread_pool.h"

namespace ferry {
namespace {

struct FloatFormat {
  int ebits, mbits, bias;
  bool has_inf;
  uint64_t nan_bits;    // canonical quiet NaN without sign
  uint64_t max_bits;    // largest finite value without sign
};

constexpr FloatFormat kF16{5, 10, 15, true, 0x7E00, 0x7BFF};
constexpr FloatFormat kBF16{8, 7, 127, true, 0x7FC0, 0x7F7F};
constexpr FloatFormat kE4M3FN{4, 3, 7, false, 0x7F, 0x7E};
constexpr FloatFormat kE5M2{5, 2, 15, true, 0x7E, 0x7B};

uint64_t encode_minifloat(double x, const FloatFormat& f, bool saturate) noexcept {
  const uint64_t sign = std::signbit(x) ? uint64_t(1) << (f.ebits + f.mbits) : 0;
  const uint64_t inf_bits = ((uint64_t(1) << f.ebits) - 1) << f.mbits;
  if (std::isnan(x)) return sign | f.nan_bits;
  const double a = std::fabs(x);
  auto overflow = [&]() -> uint64_t {
    if (saturate) return sign | f.max_bits;
    return sign | (f.has_inf ? inf_bits : f.nan_bits);
  };
  if (std::isinf(a)) return (f.has_inf && !saturate) ? (sign | inf_bits) : overflow();
  if (a == 0) return sign;
  int e2 = 0;
  std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1): floor(log2 a) = e2 - 1
  const int emin = 1 - f.bias;
  int exp = std::max(e2 - 1, emin);
  // Count a in quanta of this binade (exact: a power-of-two scale) and round that count to even.
  double r = std::nearbyint(std::ldexp(a, f.mbits - exp));
  if (r == 0) return sign;
  const double one = std::ldexp(1.0, f.mbits);
  if (r >= 2 * one) {  // rounding carried into the next binade
    r /= 2;
    exp += 1;
  }
  if (r < one) return sign | static_cast<uint64_t>(r);  // subnormal (exp == emin)
  const uint64_t efield = static_cast<uint64_t>(exp + f.bias);
  const uint64_t bits = (efield << f.mbits) | static_cast<uint64_t>(r - one);
  if (bits > f.max_bits) return overflow();
  return sign | bits;
}

double decode_minifloat(uint64_t bits, const FloatFormat& f) noexcept {
  const uint64_t emask = (uint64_t(1) << f.ebits) - 1, mmask = (uint64_t(1) << f.mbits) - 1;
  const bool neg = (bits >> (f.ebits + f.mbits)) & 1;
  const uint64_t efield = (bits >> f.mbits) & emask, mant = bits & mmask;
  const uint64_t magnitude = bits & ((uint64_t(1) << (f.ebits + f.mbits)) - 1);
  double v;
  if (magnitude > f.max_bits) {
    v = (f.has_inf && mant == 0 && efield == emask) ? HUGE_VAL : std::numeric_limits<double>::quiet_NaN();
  } else if (efield == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - f.bias - f.mbits);
  } else {
    v = std::ldexp(static_cast<double>(mant | (mmask + 1)), static_cast<int>(efield) - f.bias - f.mbits);
  }
  return neg ? -v : v;
}

const FloatFormat& format_of(DType t) noexcept {
  switch (t) {
    case DType::F16: return kF16;
    case DType::BF16: return kBF16;
    case DType::F8_E4M3FN: return kE4M3FN;
    default: return kE5M2;
  }
}

template <class T>
T bits_cast(const auto& v) noexcept {
  T out;
  std::memcpy(&out, &v, sizeof(T));
  return out;
}

const std::array<float, 256>& fp8_table(DType t) {
  static const auto make = [](const FloatFormat& f) {
    std::array<float, 256> tab{};
    for (int i = 0; i < 256; ++i) tab[i] = static_cast<float>(decode_minifloat(i, f));
    return tab;
  };
  static const std::array<float, 256> e4m3 = make(kE4M3FN), e5m2 = make(kE5M2);
  return t == DType::F8_E4M3FN ? e4m3 : e5m2;
}

const std::vector<float>& f16_table() {
  static const std::vector<float> tab = [] {
    std::vector<float> v(65536);
    for (uint32_t i = 0; i < 65536; ++i) v[i] = static_cast<float>(decode_minifloat(i, kF16));
    return v;
  }();
  return tab;
}

// ---- chunked generic path ---------------------------------------------------------------------------------

template <class T>
void load_ints(const void* src, std::size_t n, int64_t* out) {
  const T* s = static_cast<const T*>(src);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(s[i]);
}

void load_int64(const void* src, DType t, std::size_t n, int64_t* out) {
  switch (t) {
    case DType::I8: return load_ints<int8_t>(src, n, out);
    case DType::U8: return load_ints<uint8_t>(src, n, out);
    case DType::I16: return load_ints<int16_t>(src, n, out);
    case DType::I32: return load_ints<int32_t>(src, n, out);
    case DType::I64: return load_ints<int64_t>(src, n, out);
    case DType::Bool: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      for (std::size_t i = 0; i < n; ++i) out[i] = s[i] != 0;
      return;
    }
    default: return;
  }
}

template <class T>
void store_ints(const int64_t* in, std::size_t n, void* dst) {
  T* d = static_cast<T*>(dst);
  for (std::size_t i = 0; i < n; ++i) {
    int64_t v = std::clamp<int64_t>(in[i], std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
    d[i] = static_cast<T>(v);
  }
}

void store_int64(const int64_t* in, DType t, std::size_t n, void* dst) {
  switch (t) {
    case DType::I8: return store_ints<int8_t>(in, n, dst);
    case DType::U8: return store_ints<uint8_t>(in, n, dst);
    case DType::I16: return store_ints<int16_t>(in, n, dst);
    case DType::I32: return store_ints<int32_t>(in, n, dst);
    case DType::I64: return store_ints<int64_t>(in, n, dst);
    case DType::Bool: {
      uint8_t* d = static_cast<uint8_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = in[i] != 0;
      return;
    }
    default: return;
  }
}

void load_double(const void* src, DType t, std::size_t n, double* out) {
  switch (t) {
    case DType::F64: std::memcpy(out, src, n * 8); return;
    case DType::F32: {
      const float* s = static_cast<const float*>(src);
      for (std::size_t i = 0; i < n; ++i) out[i] = s[i];
      return;
    }
    case DType::F16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      const auto& tab = f16_table();
      for (std::size_t i = 0; i < n; ++i) out[i] = tab[s[i]];
      return;
    }
    case DType::BF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::F8_E4M3FN:
    case DType::F8_E5M2: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      const auto& tab = fp8_table(t);
      for (std::size_t i = 0; i < n; ++i) out[i] = tab[s[i]];
      return;
    }
    default: {
      std::vector<int64_t> tmp(n);
      load_int64(src, t, n, tmp.data());
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<double>(tmp[i]);
      return;
    }
  }
}

void store_double(const double* in, DType t, std::size_t n, void* dst, bool saturate) {
  switch (t) {
    case DType::F64: std::memcpy(dst, in, n * 8); return;
    case DType::F32: {
      float* d = static_cast<float*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<float>(in[i]);
      return;
    }
    case DType::F16:
    case DType::BF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      const auto& f = format_of(t);
      for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<uint16_t>(encode_minifloat(in[i], f, false));
      return;
    }
    case DType::F8_E4M3FN:
    case DType::F8_E5M2: {
      uint8_t* d = static_cast<uint8_t*>(dst);
      const auto& f = format_of(t);
      for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(encode_minifloat(in[i], f, saturate));
      return;
    }
    default: {
      std::vector<int64_t> tmp(n);
      for (std::size_t i = 0; i < n; ++i) {
        double v = in[i];
        if (t == DType::Bool) {
          tmp[i] = v != 0;  // NaN != 0: NaN is truthy, as in PyTorch
        } else if (std::isnan(v)) {
          tmp[i] = 0;
        } else {
          v = std::trunc(v);
          tmp[i] = v >= 9.2233720368547758e18 ? INT64_MAX : v < -9.2233720368547758e18 ? INT64_MIN : int64_t(v);
        }
      }
      store_int64(tmp.data(), t, n, dst);
      return;
    }
  }
}

void convert_chunk(const uint8_t* src, DType st, uint8_t* dst, DType dt, std::size_t n, bool saturate) {
  constexpr std::size_t kChunk = 1024;
  const std::size_t ss = dtype_size(st), ds = dtype_size(dt);
  // Fast paths.
#if FERRY_X86_KERNELS
  if (cpu_isa() >= Isa::AVX2) {
    if (st == DType::F16 && dt == DType::F32)
      return detail::f16_to_f32_avx2(reinterpret_cast<const uint16_t*>(src), reinterpret_cast<float*>(dst), n);
    if (st == DType::F32 && dt == DType::F16)
      return detail::f32_to_f16_avx2(reinterpret_cast<const float*>(src), reinterpret_cast<uint16_t*>(dst), n);
    if (st == DType::BF16 && dt == DType::F32)
      return detail::bf16_to_f32_avx2(reinterpret_cast<const uint16_t*>(src), reinterpret_cast<float*>(dst), n);
    if (st == DType::F32 && dt == DType::BF16)
      return detail::f32_to_bf16_avx2(reinterpret_cast<const float*>(src), reinterpret_cast<uint16_t*>(dst), n);
  }
#endif
  if (st == DType::F16 && dt == DType::F32) {
    const auto& tab = f16_table();
    for (std::size_t i = 0; i < n; ++i) reinterpret_cast<float*>(dst)[i] = tab[reinterpret_cast<const uint16_t*>(src)[i]];
    return;
  }
  if (st == DType::BF16 && dt == DType::F32) {
    for (std::size_t i = 0; i < n; ++i)
      reinterpret_cast<float*>(dst)[i] = bf16_to_f32(reinterpret_cast<const uint16_t*>(src)[i]);
    return;
  }
  if (st == DType::F32 && dt == DType::BF16) {
    for (std::size_t i = 0; i < n; ++i)
      reinterpret_cast<uint16_t*>(dst)[i] = f32_to_bf16(reinterpret_cast<const float*>(src)[i]);
    return;
  }
  if (is_fp8(st) && dt == DType::F32) {
    const auto& tab = fp8_table(st);
    for (std::size_t i = 0; i < n; ++i) reinterpret_cast<float*>(dst)[i] = tab[src[i]];
    return;
  }
  const bool ints = !is_floating_point(st) && !is_floating_point(dt);
  int64_t ibuf[kChunk];
  double dbuf[kChunk];
  for (std::size_t i = 0; i < n; i += kChunk) {
    std::size_t m = std::min(kChunk, n - i);
    if (ints) {
      load_int64(src + i * ss, st, m, ibuf);
      store_int64(ibuf, dt, m, dst + i * ds);
    } else {
      load_double(src + i * ss, st, m, dbuf);
      store_double(dbuf, dt, m, dst + i * ds, saturate);
    }
  }
}

}  // namespace

uint64_t encode_float(double x, DType t, bool saturate) noexcept {
  switch (t) {
    case DType::F64: return bits_cast<uint64_t>(x);
    case DType::F32: return bits_cast<uint32_t>(static_cast<float>(x));
    default: return encode_minifloat(x, format_of(t), saturate && is_fp8(t));
  }
}

double decode_float(uint64_t bits, DType t) noexcept {
  switch (t) {
    case DType::F64: return bits_cast<double>(bits);
    case DType::F32: return bits_cast<float>(static_cast<uint32_t>(bits));
    default: return decode_minifloat(bits, format_of(t));
  }
}

float f16_to_f32(uint16_t h) noexcept { return static_cast<float>(decode_minifloat(h, kF16)); }
float bf16_to_f32(uint16_t b) noexcept { return bits_cast<float>(static_cast<uint32_t>(b) << 16); }
float f8_e4m3fn_to_f32(uint8_t v) noexcept { return fp8_table(DType::F8_E4M3FN)[v]; }
float f8_e5m2_to_f32(uint8_t v) noexcept { return fp8_table(DType::F8_E5M2)[v]; }
uint16_t f32_to_f16(float f) noexcept { return static_cast<uint16_t>(encode_minifloat(f, kF16, false)); }
uint8_t f32_to_f8_e4m3fn(float f, bool sat) noexcept { return static_cast<uint8_t>(encode_minifloat(f, kE4M3FN, sat)); }
uint8_t f32_to_f8_e5m2(float f, bool sat) noexcept { return static_cast<uint8_t>(encode_minifloat(f, kE5M2, sat)); }

uint16_t f32_to_bf16(float f) noexcept {
  uint32_t u = bits_cast<uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040);  // quiet NaN, sign kept
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even on the dropped 16 bits
  return static_cast<uint16_t>(u >> 16);
}

namespace {

// Conversions from or to a quantized type go through f32 in chunks of whole blocks: dequantize (or convert) a
// chunk of the source to f32, then quantize (or convert) it to the target.
void convert_quantized(const uint8_t* src, DType st, uint8_t* dst, DType dt, std::size_t n, bool saturate) {
  const int64_t block = std::max(dtype_block_size(st), dtype_block_size(dt));
  if (n % static_cast<std::size_t>(block) != 0)
    throw Error(std::to_string(n) + " elements are not a whole number of blocks of " + std::to_string(block), "",
                std::string("converting ") + std::string(dtype_name(st)) + " to " + std::string(dtype_name(dt)));
  constexpr int64_t kChunk = 4096;  // a multiple of every block size
  const auto total = static_cast<int64_t>(n);
  parallel_for(0, (total + kChunk - 1) / kChunk, 1, [&](int64_t c0, int64_t c1) {
    std::vector<float> tmp(static_cast<std::size_t>(kChunk));
    for (int64_t i = c0 * kChunk; i < std::min(c1 * kChunk, total); i += kChunk) {
      const int64_t m = std::min(kChunk, total - i);
      const uint8_t* s = src + dtype_nbytes(st, i);
      uint8_t* d = dst + dtype_nbytes(dt, i);
      if (is_quantized(st)) dequantize(*ggml_type_of(st), s, tmp.data(), m);
      else convert_chunk(s, st, reinterpret_cast<uint8_t*>(tmp.data()), DType::F32, static_cast<std::size_t>(m), false);
      if (is_quantized(dt)) quantize(*ggml_type_of(dt), tmp.data(), d, m);
      else convert_chunk(reinterpret_cast<const uint8_t*>(tmp.data()), DType::F32, d, dt, static_cast<std::size_t>(m), saturate);
    }
  });
}

}  // namespace

void convert(const void* src, DType st, void* dst, DType dt, std::size_t n, bool saturate) {
  if (n == 0) return;
  if (st == dt) {
    if (src != dst) std::memcpy(dst, src, dtype_nbytes(st, static_cast<int64_t>(n)));
    return;
  }
  if (is_quantized(st) || is_quantized(dt))
    return convert_quantized(static_cast<const uint8_t*>(src), st, static_cast<uint8_t*>(dst), dt, n, saturate);
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  const std::size_t ss = dtype_size(st), ds = dtype_size(dt);
  constexpr std::size_t kGrain = 1 << 15;
  if (n < 2 * kGrain) return convert_chunk(s, st, d, dt, n, saturate);
  parallel_for(0, static_cast<int64_t>(n), kGrain, [&](int64_t b, int64_t e) {
    convert_chunk(s + b * ss, st, d + b * ds, dt, static_cast<std::size_t>(e - b), saturate);
  });
}

}  // namespace ferry
