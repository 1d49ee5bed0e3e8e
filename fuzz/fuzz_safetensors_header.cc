// Fuzzes the safetensors header parser with whole files: any input must either throw ferry::Error or yield a header
// whose tensors tile the data section inside the input.
#include <cstdint>
#include <cstdlib>

#include "ferry/core/error.h"
#include "ferry/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto h = ferry::io::parse_safetensors_header(data, size, "fuzz");
    std::size_t pos = 0;
    for (const auto& e : h.tensors) {
      if (e.begin != pos || e.end < e.begin || h.data_start + e.end > size) std::abort();
      pos = e.end;
    }
    if (h.data_start + pos != size) std::abort();
  } catch (const ferry::Error&) {
  }
  return 0;
}
