// Fuzzes the zip central-directory reader: any input either throws ferry::Error or yields entries whose data lies
// inside the input.
#include <cstdint>
#include <cstdlib>

#include "ferry/core/error.h"
#include "io/zip_directory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    for (const auto& e : ferry::io::detail::read_zip_directory(data, size, "fuzz"))
      if (e.data_offset > size || e.compressed_size > size - e.data_offset) std::abort();
  } catch (const ferry::Error&) {
  }
  return 0;
}
