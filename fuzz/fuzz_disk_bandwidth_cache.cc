// Fuzzes the disk-bandwidth cache parser (~/.cache/ferry/disk-bandwidth.json): any input yields nothing or an entry
// whose points the StagedReader can use (whole 4096-byte requests up to 1 GiB, 1..4096 in flight, a positive speed).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ferry/io/disk_bandwidth.h"

namespace {

bool usable(const ferry::io::DiskReadPoint& p) {
  return p.request_bytes > 0 && p.request_bytes % 4096 == 0 && p.request_bytes <= (std::size_t{1} << 30) &&
         p.queue_depth >= 1 && p.queue_depth <= 4096 && std::isfinite(p.gb_per_s) && p.gb_per_s > 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const char* device : {"vda (254:0)", "8:0"}) {
    const auto bw = ferry::io::parse_disk_bandwidth_cache(text, device);
    if (!bw) continue;
    if (!usable(bw->best) || bw->grid.empty()) std::abort();
    for (const auto& p : bw->grid)
      if (!usable(p)) std::abort();
    if (!usable(ferry::io::best_read_point(*bw))) std::abort();
  }
  return 0;
}
