// DeviceStagedWeights: offloaded weights copied ahead to the accelerator that runs them (the GPU half of the staging
// pipeline, DESIGN.md "Round 2 directions": disk → staging buffer → copy stream → GPU).
//
// Wraps the weights map of a dispatched model's offloaded modules (RAM or disk). The Prefetcher (prefetch.h) calls
// prefetch(name) on its own thread for the modules about to run: the weight is read from the inner map (pinned
// host memory when the cpu part was loaded for a GPU, the staging pool for direct disk reads, the page cache
// otherwise) and an asynchronous copy to the device starts on the device's copy stream. When the module's hook
// asks get(name), the device copy is handed over after ordering it before the module's kernels, so host→device
// copies overlap the compute of the modules before. A name that was not prefetched is copied synchronously, as
// Accelerate's hooks do; outputs are bit-identical either way.
//
// Device memory: each prefetched module's weights occupy the device from prefetch until its forward returns; plan
// for prefetch × the largest offloaded module on the execution device (gpu_prefetch_bytes_for, offload_plan.h).
// Used by dispatch_model, cpu_offload and disk_offload whenever the execution device is an accelerator and a
// prefetcher is on; with virtual devices (tests) the copies are synchronous and the bookkeeping the same.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ferry/core/backend.h"
#include "ferry/io/offload.h"

namespace ferry {

class DeviceStagedWeights final : public io::WeightsMap {
 public:
  /// `inner`: where the weights are (host); `device`: the accelerator the modules execute on.
  DeviceStagedWeights(std::shared_ptr<const io::WeightsMap> inner, Device device);
  ~DeviceStagedWeights() override;

  /// The weight on `device`: the prefetched copy when there is one (waiting for a copy under way), else copied now.
  Tensor get(const std::string& key) const override;
  /// The rows from the inner map, copied to the device (synchronously: a lookup's few rows).
  Tensor get_rows(const std::string& key, std::span<const int64_t> rows) const override;
  bool contains(const std::string& key) const override { return inner_->contains(key); }
  std::vector<std::string> keys() const override { return inner_->keys(); }
  std::size_t size() const override { return inner_->size(); }
  /// Reads the weight from the inner map and starts its copy to the device; nothing when a copy is waiting or under
  /// way. True unless it failed, so the prefetcher keeps prefetching even when the inner map's bytes are in RAM.
  bool prefetch(const std::string& key) const noexcept override;

  Device device() const noexcept { return device_; }
  const std::shared_ptr<const io::WeightsMap>& inner() const noexcept { return inner_; }

  struct Stats {
    uint64_t staged = 0;      // get() served by a prefetched copy
    uint64_t synchronous = 0; // get() that had to copy itself
    uint64_t failed = 0;      // prefetches that failed (the get() then copied synchronously)
  };
  Stats stats() const;

 private:
  struct Staged {
    Tensor device;                      // the copy's destination
    Tensor host;                        // kept until the copy is done: its bytes may be a reusable staging buffer
    std::shared_ptr<CopyEvent> event;   // nullptr: already complete
  };
  static void finish(Staged& s);  // waits for the copy; then host may be released

  std::shared_ptr<const io::WeightsMap> inner_;
  Device device_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, Staged> ready_;
  mutable std::unordered_map<std::string, uint64_t> gets_;
  mutable std::unordered_set<std::string> in_flight_;  // prefetches under way; get() waits for them
  mutable std::condition_variable arrived_;  // get() calls per key: a prefetch overtaken by its get is dropped
  mutable Stats stats_;
};

/// `weights` wrapped in a DeviceStagedWeights when modules executing on `execution_device` prefetch (prefetch on,
/// execution device an accelerator), else `weights` itself (also when null).
std::shared_ptr<const io::WeightsMap> stage_on_execution_device(std::shared_ptr<const io::WeightsMap> weights,
                                                                Device execution_device, bool prefetching);

}  // namespace ferry
