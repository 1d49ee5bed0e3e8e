// The backend registry: one Backend per device kind that owns bytes (cpu, cuda, virt). This is the seam the
// CUDA backend (src/ops/cuda) plugs into without core knowing CUDA: it registers itself for Device::Kind::CUDA.
//
// Copies between two host-addressable devices are plain memcpy; any other copy goes to the backend of the
// non-host side. Copies are synchronous here; asynchronous variants with streams belong to the backend.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "ferry/core/device.h"
#include "ferry/core/storage.h"

namespace ferry {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  /// Allocates `nbytes` on `device`; throws ferry::Error (naming the device and the sizes) when out of memory.
  virtual std::shared_ptr<Storage> allocate(Device device, std::size_t nbytes) = 0;
  /// Copies n bytes; either side may be host memory. Synchronous.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t n) = 0;
  /// Number of devices of this kind present.
  virtual int device_count() const = 0;
  /// Free bytes on `device` (for get_max_memory), or nullopt when unknown.
  virtual std::optional<std::size_t> free_memory(Device device) const = 0;
};

/// Registers `backend` for `kind`, replacing any previous one. Thread-safe.
void register_backend(Device::Kind kind, std::shared_ptr<Backend> backend);
/// The backend for `kind`, or nullptr when none is registered (e.g. CUDA in a build without it).
std::shared_ptr<Backend> find_backend(Device::Kind kind);
/// The backend for `device`; throws ferry::Error saying what is missing ("ferry was built without CUDA").
std::shared_ptr<Backend> backend_for(Device device);

/// Copies n bytes between any two devices with bytes (not meta or disk).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t n);

/// Number of accelerators planners may use: CUDA GPUs, or the enabled virtual devices when there are no GPUs.
/// Ordered cuda:0.. first.
std::vector<Device> accelerator_devices();

// ---- Virtual devices (tests only) ----------------------------------------------------------------------------
// Host memory posing as accelerators, so CI can exercise multi-device plans, io_same_device and copies without a
// GPU (the precedent is XLA's forced host-platform device count). Never enabled implicitly: only by this call
// or FERRY_VIRTUAL_DEVICES=N[:capacity_bytes] read on first use of the registry.
struct VirtualDeviceOptions {
  int count = 2;
  std::size_t capacity_bytes = std::size_t(1) << 30;  // reported as free memory; allocations beyond fail
  double copy_bandwidth_bytes_per_s = 0;              // 0 = unthrottled; else copies sleep to emulate a link
};
void enable_virtual_devices(const VirtualDeviceOptions& options);
void disable_virtual_devices();
int virtual_device_count();

}  // namespace ferry
