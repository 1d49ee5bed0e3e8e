// DType sizes and names (see include/ferry/core/dtype.h).
#include "ferry/core/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "ferry/core/error.h"

namespace ferry {
namespace {

struct DTypeInfo {
  DType type;
  std::size_t size;  // bytes per element, or per block
  int64_t block;     // elements per block
  double plan_size;
  bool floating;
  std::string_view name, safetensors, numpy;
};

constexpr std::array<DTypeInfo, 20> kInfo{{
    {DType::F32, 4, 1, 4.0, true, "f32", "F32", "float32"},
    {DType::F16, 2, 1, 2.0, true, "f16", "F16", "float16"},
    {DType::BF16, 2, 1, 2.0, true, "bf16", "BF16", "bfloat16"},
    {DType::F8_E4M3FN, 1, 1, 1.0, true, "f8_e4m3fn", "F8_E4M3", "float8_e4m3fn"},
    {DType::F8_E5M2, 1, 1, 1.0, true, "f8_e5m2", "F8_E5M2", "float8_e5m2"},
    {DType::F64, 8, 1, 8.0, true, "f64", "F64", "float64"},
    {DType::I8, 1, 1, 1.0, false, "i8", "I8", "int8"},
    {DType::U8, 1, 1, 1.0, false, "u8", "U8", "uint8"},
    {DType::I16, 2, 1, 2.0, false, "i16", "I16", "int16"},
    {DType::I32, 4, 1, 4.0, false, "i32", "I32", "int32"},
    {DType::I64, 8, 1, 8.0, false, "i64", "I64", "int64"},
    {DType::Bool, 1, 1, 0.125, false, "bool", "BOOL", "bool"},
    // Quantized (ggml block layouts, core/quant.h): no safetensors spelling; ferry's name in offload indexes.
    {DType::Q8_0, 34, 32, 34.0 / 32, false, "q8_0", "", "q8_0"},
    {DType::Q4_0, 18, 32, 18.0 / 32, false, "q4_0", "", "q4_0"},
    {DType::Q4_1, 20, 32, 20.0 / 32, false, "q4_1", "", "q4_1"},
    {DType::Q5_0, 22, 32, 22.0 / 32, false, "q5_0", "", "q5_0"},
    {DType::Q5_1, 24, 32, 24.0 / 32, false, "q5_1", "", "q5_1"},
    {DType::Q4_K, 144, 256, 144.0 / 256, false, "q4_k", "", "q4_k"},
    {DType::Q5_K, 176, 256, 176.0 / 256, false, "q5_k", "", "q5_k"},
    {DType::Q6_K, 210, 256, 210.0 / 256, false, "q6_k", "", "q6_k"},
}};

const DTypeInfo& info(DType t) noexcept { return kInfo[static_cast<std::size_t>(t)]; }

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

std::size_t dtype_size(DType t) noexcept { return info(t).size; }
int64_t dtype_block_size(DType t) noexcept { return info(t).block; }
std::size_t dtype_nbytes(DType t, int64_t numel) noexcept {
  const auto& i = info(t);
  const auto n = static_cast<std::size_t>(numel);
  return i.block == 1 ? n * i.size : (n + static_cast<std::size_t>(i.block) - 1) / static_cast<std::size_t>(i.block) * i.size;
}
bool is_quantized(DType t) noexcept { return info(t).block > 1; }
double dtype_byte_size(DType t) noexcept { return info(t).plan_size; }
bool is_floating_point(DType t) noexcept { return info(t).floating; }
bool is_fp8(DType t) noexcept { return t == DType::F8_E4M3FN || t == DType::F8_E5M2; }
std::string_view dtype_name(DType t) noexcept { return info(t).name; }
std::string_view safetensors_dtype_name(DType t) noexcept { return info(t).safetensors; }
std::string_view numpy_dtype_name(DType t) noexcept { return info(t).numpy; }

std::optional<DType> dtype_from_safetensors(std::string_view name) noexcept {
  for (const auto& i : kInfo)
    if (!i.safetensors.empty() && i.safetensors == name) return i.type;
  return std::nullopt;
}

std::optional<DType> dtype_from_numpy(std::string_view name) noexcept {
  for (const auto& i : kInfo)
    if (i.numpy == name) return i.type;
  return std::nullopt;
}

DType parse_dtype(std::string_view name) {
  std::string s = lower(name);
  if (s.rfind("torch.", 0) == 0) s = s.substr(6);
  for (const auto& i : kInfo)
    if (!s.empty() && (s == i.name || s == lower(i.safetensors) || s == i.numpy)) return i.type;
  static constexpr std::pair<std::string_view, DType> kAliases[] = {
      {"float", DType::F32},         {"fp32", DType::F32},          {"half", DType::F16},
      {"fp16", DType::F16},          {"double", DType::F64},        {"fp64", DType::F64},
      {"long", DType::I64},          {"int", DType::I32},           {"short", DType::I16},
      {"fp8", DType::F8_E4M3FN},     {"f8_e4m3", DType::F8_E4M3FN}, {"float8_e4m3", DType::F8_E4M3FN},
      {"fp8_e4m3", DType::F8_E4M3FN}, {"fp8_e5m2", DType::F8_E5M2},
  };
  for (const auto& [alias, t] : kAliases)
    if (s == alias) return t;
  throw Error("unknown dtype '" + std::string(name) + "'", "",
              "use one of f32, f16, bf16, f8_e4m3fn, f8_e5m2, f64, i8, u8, i16, i32, i64, bool "
              "(float32/float16/bfloat16 and torch.* spellings work too), or a quantized type: q8_0, q4_0, q4_1, "
              "q5_0, q5_1, q4_k, q5_k, q6_k");
}

}  // namespace ferry
