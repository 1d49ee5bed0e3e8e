// Memory budgets for planning: how many bytes each device may hold, parsed from Accelerate's spellings
// ("10GiB", "10GB", "500MB", integers = bytes) and, when the user gives none, measured (free GPU memory, the
// CPU's MemAvailable).
//
// A MaxMemory is always in Accelerate's device order: accelerators (cuda:0, cuda:1, ..., then virt:0, ...), then
// cpu, then disk — the order infer_auto_device_map fills them in. Like Accelerate, a budget without "cpu" means
// the planner never offloads to the CPU (it goes from the GPUs straight to disk).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/core/device.h"

namespace ferry {

/// Bytes in a size string. Accelerate: convert_file_size_to_int.
///   "10GiB" = 10·2^30, "4MiB", "1KiB"; "10GB" = 10·10^9, "500MB", "2KB"; "1.5GiB" (fractions truncate);
///   a plain integer "123" = 123 bytes (Accelerate only accepts ints here, not digit strings).
///   Units are case-insensitive, except that a lower-case final "b" means *bits*, as in Accelerate: "8Gb" = 10^9.
/// Throws ferry::Error echoing the bad value and showing a valid one for "5MBB", "-1GB", "", "GB", "1e400GB".
int64_t convert_file_size_to_int(std::string_view size);

/// An ordered budget: device -> bytes. Value type; not thread-safe for concurrent mutation.
///
///   MaxMemory m = MaxMemory::parse({{"0", "10GiB"}, {"cpu", "30GB"}});
///   m.get(Device::cuda(0));  // 10737418240
class MaxMemory {
 public:
  struct Entry {
    Device device;
    int64_t bytes = 0;
    friend bool operator==(const Entry&, const Entry&) = default;
  };

  MaxMemory() = default;
  /// From already-parsed devices and byte counts, e.g. {{Device::cuda(0), 200}, {Device::cpu(), 1000}}.
  MaxMemory(std::initializer_list<Entry> entries);

  /// Keys as Accelerate writes them: 0 / "0" / "cuda:0" (GPU 0), "virt:N", "cpu", "disk"; values are sizes
  /// (convert_file_size_to_int). Throws ferry::Error naming the bad key or value.
  static MaxMemory parse(const std::vector<std::pair<std::string, std::string>>& entries);
  /// A JSON object: {"0": "10GiB", "cpu": 30000000000, "disk": "1TB"}.
  static MaxMemory from_json(std::string_view json_text);
  /// A command-line list: "0=10GiB,1=10GiB,cpu=30GB"; a disk may come without a size ("disk", "rank1:disk"): no
  /// limit. Devices may name ranks ("rank1:cpu=8GiB", a pipeline's budgets).
  static MaxMemory from_flag(std::string_view flag);

  /// Sets the budget of `device` (cpu, disk, cuda:N or virt:N); throws ferry::Error for meta or bytes < 0.
  void set(Device device, int64_t bytes);
  bool erase(Device device);
  std::optional<int64_t> get(Device device) const;
  bool contains(Device device) const { return get(device).has_value(); }

  /// Entries in planning order: accelerators by (kind, index), then cpu, then disk.
  const std::vector<Entry>& entries() const { return entries_; }
  /// The accelerator devices present, in order.
  std::vector<Device> accelerators() const;
  bool empty() const { return entries_.empty(); }
  std::size_t size() const { return entries_.size(); }

  /// {"0": 200, "1": 300, "cpu": 1000} — GPUs keyed by their index, like Accelerate's dict.
  std::string to_json() const;
  /// "cuda:0=200 B, cpu=1.0 GiB" for messages.
  std::string describe() const;

  friend bool operator==(const MaxMemory&, const MaxMemory&) = default;

 private:
  std::vector<Entry> entries_;
};

/// The budget to plan with. Accelerate: get_max_memory.
/// Without `user`: every accelerator's free memory (GPUs from the CUDA backend, else enabled virtual devices;
/// a device whose free memory is unknown is skipped with an info log), then cpu = MemAvailable from /proc/meminfo.
/// With `user`: returned as given (already ordered), with a warning for each accelerator that is not present.
MaxMemory get_max_memory(const std::optional<MaxMemory>& user = std::nullopt);

/// Bytes the CPU can still give: MemAvailable from /proc/meminfo (sysconf fallback when it is unreadable).
int64_t available_host_memory();

/// Bytes of RAM the page cache can use for this process: available_host_memory(), capped by the memory cgroup's
/// limit less its usage (cgroup v1 memory.limit_in_bytes, or v2 memory.max) when one applies. What decides the
/// offload-io policy (offload_io.h) and the default KV-cache budgets of `ferry generate -i` and `ferry serve`.
std::uint64_t cacheable_ram_bytes();

/// "1.5 GiB", "200 B" — sizes for people.
std::string format_bytes(int64_t bytes);

}  // namespace ferry
