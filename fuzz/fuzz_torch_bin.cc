// Fuzzes the whole .bin loader (zip directory, libzip, unpickler, storages, strided views) on in-memory files
// (a memfd opened by path), then reads every byte of every tensor so ASan sees any view that escapes its file.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "ferry/core/error.h"
#include "ferry/io/torch_bin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("fuzz.bin", 0);
  if (fd < 0) return 0;
  if (size && write(fd, data, size) != static_cast<ssize_t>(size)) {
    close(fd);
    return 0;
  }
  try {
    const auto sd = ferry::io::load_torch_bin("/proc/self/fd/" + std::to_string(fd));
    volatile uint8_t sink = 0;
    for (const auto& [name, t] : sd) {
      if (t.nbytes() == 0) continue;
      const auto* p = static_cast<const uint8_t*>(t.raw_data());
      for (std::size_t i = 0; i < t.nbytes(); ++i) sink = sink ^ p[i];
    }
  } catch (const ferry::Error&) {
  }
  close(fd);
  return 0;
}
