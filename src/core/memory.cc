// Allocation accounting per device (see include/ferry/core/memory.h).
#include "ferry/core/memory.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace ferry {
namespace {

struct Accounts {
  std::mutex mu;
  std::map<Device, MemoryStats> stats;
};

Accounts& accounts() {
  static Accounts* a = new Accounts;  // never destroyed: storages may be freed during static destruction
  return *a;
}

}  // namespace

MemoryStats memory_stats(Device d) {
  auto& a = accounts();
  std::lock_guard lock(a.mu);
  auto it = a.stats.find(d);
  return it == a.stats.end() ? MemoryStats{} : it->second;
}

void reset_peak_memory_stats(Device d) {
  auto& a = accounts();
  std::lock_guard lock(a.mu);
  auto& s = a.stats[d];
  s.peak = s.current;
}

namespace detail {

void record_alloc(Device d, int64_t bytes) {
  auto& a = accounts();
  std::lock_guard lock(a.mu);
  auto& s = a.stats[d];
  s.current += bytes;
  s.peak = std::max(s.peak, s.current);
}

void record_free(Device d, int64_t bytes) {
  auto& a = accounts();
  std::lock_guard lock(a.mu);
  a.stats[d].current -= bytes;
}

void record_map(Device d, int64_t bytes) {
  auto& a = accounts();
  std::lock_guard lock(a.mu);
  a.stats[d].mapped += bytes;
}

}  // namespace detail
}  // namespace ferry
