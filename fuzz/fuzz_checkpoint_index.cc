// Fuzzes the *.index.json parser: any input either throws ferry::Error or yields only plain shard file names.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ferry/core/error.h"
#include "ferry/io/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto index =
        ferry::io::parse_checkpoint_index(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    for (const auto& [tensor, shard] : index.weight_map)
      if (!ferry::io::is_plain_file_name(shard)) std::abort();
  } catch (const ferry::Error&) {
  }
  return 0;
}
