// Run-time ISA detection and override (see include/ferry/core/cpu_features.h).
#include "ferry/core/cpu_features.h"

#if FERRY_X86_KERNELS  // x86-64 builds; elsewhere only the portable paths exist (FerryOptions.cmake)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdlib>
#include <string>

#include "ferry/core/error.h"

namespace ferry {
namespace {

bool detect_avx2() noexcept {
#if FERRY_X86_KERNELS
  __builtin_cpu_init();
  // F16C through cpuid: clang 14's __builtin_cpu_supports does not know "f16c". AVX2 and FMA come from the
  // builtin, which also checks that the OS saves the YMM registers.
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
#else
  return false;
#endif
}

bool detect_avx512() noexcept {
#if FERRY_X86_KERNELS
  __builtin_cpu_init();
  return detect_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

bool detect_avx512_bf16() noexcept {
#if FERRY_X86_KERNELS
  unsigned a = 0, b = 0, c = 0, d = 0;
  return detect_avx512() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
#else
  return false;
#endif
}

Isa best_isa() noexcept {
  static const Isa best = detect_avx512() ? Isa::AVX512 : detect_avx2() ? Isa::AVX2 : Isa::Scalar;
  return best;
}

Isa initial_isa() noexcept {
  const char* env = std::getenv("FERRY_ISA");
  const Isa best = best_isa();
  if (env && std::string(env) == "scalar") return Isa::Scalar;
  if (env && std::string(env) == "avx2" && best >= Isa::AVX2) return Isa::AVX2;
  return best;
}

std::atomic<Isa>& current() {
  static std::atomic<Isa> isa{initial_isa()};
  return isa;
}

}  // namespace

bool cpu_supports(Isa isa) noexcept { return isa <= best_isa(); }

bool cpu_has_avx512_bf16() noexcept {
  static const bool has = detect_avx512_bf16();
  return has;
}

Isa cpu_isa() noexcept { return current().load(std::memory_order_relaxed); }

void set_cpu_isa(Isa isa) {
  if (!cpu_supports(isa)) throw Error(std::string("this CPU does not support ") + std::string(isa_name(isa)));
  current().store(isa, std::memory_order_relaxed);
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out{Isa::Scalar};
  if (cpu_supports(Isa::AVX2)) out.push_back(Isa::AVX2);
  if (cpu_supports(Isa::AVX512)) out.push_back(Isa::AVX512);
  return out;
}

std::string_view isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::AVX512: return "avx512";
    case Isa::AVX2: return "avx2";
    default: return "scalar";
  }
}

}  // namespace ferry
