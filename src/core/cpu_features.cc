// Run-time ISA detection and override (see include/ferry/core/cpu_features.h).
#include "ferry/core/cpu_features.h"

#if FERRY_X86_KERNELS  // x86-64 builds; elsewhere only the portable paths exist (FerryOptions.cmake)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

#include <algorithm>
#include <atomic>
#include <cstdio>
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

// AMX: cpuid leaf 7 EDX bits 22 (AMX-BF16), 24 (AMX-TILE), 25 (AMX-INT8); XCR0 bits 17-18 (the OS manages the tile
// configuration and data); and, on Linux 5.16+, leave to use the tile data (ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA), without which the first tile instruction kills the process with SIGILL.
std::string& amx_reason() {
  static std::string reason;
  return reason;
}

bool detect_amx() noexcept {
#if FERRY_X86_KERNELS
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!detect_avx512_bf16() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  constexpr unsigned kBf16 = 1u << 22, kTile = 1u << 24, kInt8 = 1u << 25;
  if ((d & (kBf16 | kTile | kInt8)) != (kBf16 | kTile | kInt8)) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & (3u << 17)) != (3u << 17)) {
    amx_reason() = "the OS does not enable the AMX tile state (XCR0 bits 17-18)";
    return false;
  }
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    amx_reason() = "Linux refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM; kernel before 5.16?)";
    return false;
  }
  return true;
#else
  amx_reason() = "AMX tiles are used on Linux only";
  return false;
#endif
#else
  return false;
#endif
}

Isa best_isa() noexcept {
  static const Isa best = [] {
    if (!detect_avx512()) return detect_avx2() ? Isa::AVX2 : Isa::Scalar;
    if (detect_amx()) return Isa::AMX;
    if (!amx_reason().empty()) std::fprintf(stderr, "ferry: AMX not used, AVX-512 instead: %s\n", amx_reason().c_str());
    return Isa::AVX512;
  }();
  return best;
}

Isa initial_isa() noexcept {
  const char* env = std::getenv("FERRY_ISA");
  const Isa best = best_isa();
  const std::optional<Isa> want = env ? isa_from_name(env) : std::nullopt;
  return want ? std::min(*want, best) : best;
}

std::atomic<Isa>& current() {
  static std::atomic<Isa> isa{initial_isa()};
  return isa;
}

}  // namespace

bool cpu_supports(Isa isa) noexcept { return isa <= best_isa(); }

std::string_view amx_unavailable_reason() noexcept {
  (void)best_isa();
  return amx_reason();
}

bool cpu_has_avx512_bf16() noexcept {
  static const bool has = detect_avx512_bf16();
  return has;
}

Isa cpu_isa() noexcept { return current().load(std::memory_order_relaxed); }

void set_cpu_isa(Isa isa) {
  if (!cpu_supports(isa)) {
    const std::string best(isa_name(best_isa()));
    const std::string why = isa == Isa::AMX && !amx_reason().empty() ? amx_reason() : "this CPU runs at most " + best;
    throw Error(ErrorKind::InvalidValue, std::string(isa_name(isa)) + " is not available: " + why, "",
                "use " + best + " or lower, or leave the choice to ferry (the best this CPU runs)");
  }
  current().store(isa, std::memory_order_relaxed);
}

std::optional<Isa> isa_from_name(std::string_view name) noexcept {
  for (Isa isa : {Isa::Scalar, Isa::AVX2, Isa::AVX512, Isa::AMX})
    if (name == isa_name(isa)) return isa;
  return std::nullopt;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out{Isa::Scalar};
  if (cpu_supports(Isa::AVX2)) out.push_back(Isa::AVX2);
  if (cpu_supports(Isa::AVX512)) out.push_back(Isa::AVX512);
  if (cpu_supports(Isa::AMX)) out.push_back(Isa::AMX);
  return out;
}

std::string_view isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::AMX: return "amx";
    case Isa::AVX512: return "avx512";
    case Isa::AVX2: return "avx2";
    default: return "scalar";
  }
}

}  // namespace ferry
