// Fuzzes the offload-folder index.json parser: any input either throws ferry::Error or yields entries that name a
// file inside the folder and have a complete dtype + shape (or point into a safetensors file).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ferry/core/error.h"
#include "ferry/io/checkpoint.h"
#include "ferry/io/offload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto index =
        ferry::io::parse_offload_index(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    for (const auto& [name, e] : index) {
      if (e.in_safetensors()) continue;
      if (!ferry::io::is_plain_file_name(name + ".dat") || !e.dtype || !e.shape) std::abort();
    }
  } catch (const ferry::Error&) {
  }
  return 0;
}
