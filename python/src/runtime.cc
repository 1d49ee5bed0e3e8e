// ferry.cpu_isa(), ferry.set_cpu_isa(), ferry.supported_isas(): which CPU kernels run (FERRY_ISA in code), for
// comparisons and bug reports, as the CLI's --isa.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "ferry/core/cpu_features.h"
#include "ferry/core/error.h"

namespace ferry::python {

using namespace nb::literals;

void bind_runtime(nb::module_& m) {
  m.def(
      "cpu_isa", [] { return std::string(isa_name(cpu_isa())); },
      "The CPU kernels in use: 'scalar', 'avx2', 'avx512' or 'amx' (bf16 linear layers on Intel AMX tiles).");
  m.def(
      "supported_isas",
      [] {
        std::vector<std::string> out;
        for (Isa i : ferry::supported_isas()) out.emplace_back(isa_name(i));
        return out;
      },
      "Every kernel set this CPU runs, lowest first.");
  m.def(
      "set_cpu_isa",
      [](const std::string& name) {
        for (Isa i : {Isa::Scalar, Isa::AVX2, Isa::AVX512, Isa::AMX}) {
          if (name != isa_name(i)) continue;
          if (!cpu_supports(i)) {
            const std::string why = i == Isa::AMX && !amx_unavailable_reason().empty()
                                        ? std::string(amx_unavailable_reason())
                                        : "this CPU does not run it";
            throw Error(ErrorKind::InvalidValue, "isa " + name + " is not available: " + why, "",
                        "pick one of ferry.supported_isas()");
          }
          return set_cpu_isa(i);
        }
        throw Error(ErrorKind::InvalidValue, "unknown isa '" + name + "'", "", "one of scalar, avx2, avx512, amx");
      },
      "isa"_a,
      "Caps the CPU kernels for this process (as FERRY_ISA or the CLI's --isa): 'scalar', 'avx2', 'avx512' or 'amx'.");
}

}  // namespace ferry::python
