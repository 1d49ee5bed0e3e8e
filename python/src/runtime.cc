// ferry.cpu_isa(), ferry.set_cpu_isa(), ferry.supported_isas(): which CPU kernels run (FERRY_ISA in code), for
// comparisons and bug reports, as the CLI's --isa.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "ferry/core/cpu_features.h"
#include "ferry/core/error.h"
#include "ferry/core/process_group.h"

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
        const std::optional<Isa> isa = isa_from_name(name);
        if (!isa)
          throw Error(ErrorKind::InvalidValue, "unknown isa '" + name + "'", "", "one of scalar, avx2, avx512, amx");
        set_cpu_isa(*isa);  // throws, saying why, when this CPU lacks it
      },
      "isa"_a,
      "Caps the CPU kernels for this process (as FERRY_ISA or the CLI's --isa): 'scalar', 'avx2', 'avx512' or 'amx'.");
  m.def(
      "get_rank", [] { return world_process_group()->rank(); },
      "This process's rank in the job (0 outside mpirun). torch.distributed.get_rank; started by mpirun, ferry joins "
      "MPI's world, where a device map over ranks ({'model.layers.3': 'rank1:cpu'}) splits a model (a pipeline).");
  m.def(
      "get_world_size", [] { return world_process_group()->size(); },
      "The number of ranks in the job (1 outside mpirun). torch.distributed.get_world_size");
}

}  // namespace ferry::python
