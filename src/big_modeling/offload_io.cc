// The offload-io policy (include/ferry/big_modeling/offload_io.h).
#include "ferry/big_modeling/offload_io.h"

#include <string>

#include "ferry/core/error.h"

namespace ferry {

OffloadIo parse_offload_io(std::string_view text) {
  if (text == "auto") return OffloadIo::Auto;
  if (text == "direct") return OffloadIo::Direct;
  if (text == "mmap") return OffloadIo::Mmap;
  throw Error("unknown offload io mode \"" + std::string(text) + "\"", "--offload-io", "use auto, direct or mmap");
}

const char* to_string(OffloadIo io) {
  switch (io) {
    case OffloadIo::Auto: return "auto";
    case OffloadIo::Direct: return "direct";
    case OffloadIo::Mmap: return "mmap";
  }
  return "unknown";
}

OffloadIo choose_offload_io(OffloadIo requested, std::uint64_t disk_bytes, std::uint64_t cacheable) {
  if (requested != OffloadIo::Auto) return requested;
  return disk_bytes > cacheable / 10 * 8 ? OffloadIo::Direct : OffloadIo::Mmap;
}

}  // namespace ferry
