// Per-device allocation accounting: every byte ferry allocates is counted against its device (current and
// peak), so tests and benchmarks assert memory instead of guessing it. Bytes mapped from files are counted
// separately (`mapped`): they are page cache, not allocations. Thread-safe.
#pragma once

#include <cstdint>

#include "ferry/core/device.h"

namespace ferry {

struct MemoryStats {
  int64_t current = 0;  // bytes allocated now
  int64_t peak = 0;     // highest `current` since start or the last reset_peak_memory_stats
  int64_t mapped = 0;   // bytes of file mappings viewed by live tensors on this device
};

/// Like torch.cuda.memory_allocated / max_memory_allocated, for any device (cpu, cuda:N, virt:N).
MemoryStats memory_stats(Device d);
/// Sets peak = current for `d`.
void reset_peak_memory_stats(Device d);

namespace detail {
void record_alloc(Device d, int64_t bytes);
void record_free(Device d, int64_t bytes);
void record_map(Device d, int64_t bytes);  // negative to unmap
}  // namespace detail

}  // namespace ferry
