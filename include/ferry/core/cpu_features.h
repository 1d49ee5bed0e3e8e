// Which instruction sets this CPU runs, decided once at run time. Kernels are compiled once per ISA (files named
// *_avx2.cc get -mavx2 -mfma -mf16c, nothing else does) and chosen through cpu_isa(), so one binary runs on any
// x86-64. The ISAs built:
//   Scalar  always: the fallback and the test oracle.
//   AVX2    AVX2 + FMA + F16C (Haswell, 2013, and later): 8-wide f32, hardware f16 conversion.
//   AVX512  AVX2's set plus AVX-512 F/BW/VL/DQ and VNNI (Ice Lake, Zen 4 and later): files named *_avx512.cc.
//           Kernels without an AVX-512 version run their AVX2 one (isa >= Isa::AVX2).
// Within AVX512, AVX512_BF16 (vdpbf16ps; Cooper Lake, Zen 4 and later) is a separate bit, cpu_has_avx512_bf16():
// files named *_avx512bf16.cc get it, and the kernels that use it run only when the ISA in use is AVX512 and the
// bit is set (so FERRY_ISA=avx2 also turns them off).
//   AMX     AVX512 with AVX512_BF16 plus Intel AMX tiles (AMX-TILE, AMX-BF16, AMX-INT8; Sapphire Rapids and later),
//           with the kernel's leave to use them: Linux hands out the 8 KiB of tile state per process on request
//           (arch_prctl ARCH_REQ_XCOMP_PERM), asked once at start-up; a refusal leaves AVX512, with one line on
//           stderr. Files named *_amx.cc get -mamx-tile -mamx-bf16 -mamx-int8 on top of the AVX512 BF16 flags.
// FERRY_ISA=scalar|avx2|avx512|amx caps the ISA (for tests, comparisons and bug reports; a level the CPU lacks caps at
// the best it has); set_cpu_isa does the same in code.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace ferry {

enum class Isa { Scalar, AVX2, AVX512, AMX };  // ordered: each includes the previous

bool cpu_supports(Isa isa) noexcept;
/// Whether the CPU runs AVX-512 BF16 (cpuid leaf 7 subleaf 1, EAX bit 5) on top of the AVX512 set.
bool cpu_has_avx512_bf16() noexcept;
/// Why the best ISA is below AMX on a CPU whose cpuid lists the AMX tiles (the OS refused the tile state, or XCR0
/// lacks it); empty when AMX is in use or the CPU has no AMX.
std::string_view amx_unavailable_reason() noexcept;
/// The ISA kernels use now: the best supported one, unless overridden.
Isa cpu_isa() noexcept;
/// Forces an ISA (tests, --isa, ferry.set_cpu_isa). Throws ferry::Error (InvalidValue) when the CPU lacks it, saying
/// why for AMX (amx_unavailable_reason) and naming the best ISA it has.
void set_cpu_isa(Isa isa);
/// The ISA named "scalar", "avx2", "avx512" or "amx" (isa_name's spelling); nullopt for any other name.
std::optional<Isa> isa_from_name(std::string_view name) noexcept;
/// Every ISA this CPU supports, Scalar first (tests loop over it).
std::vector<Isa> supported_isas();
std::string_view isa_name(Isa isa) noexcept;

/// RAII override of cpu_isa() for a scope (tests).
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) : saved_(cpu_isa()) { set_cpu_isa(isa); }
  ~ScopedIsa() { set_cpu_isa(saved_); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  Isa saved_;
};

}  // namespace ferry
