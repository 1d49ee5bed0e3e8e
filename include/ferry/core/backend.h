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

#include "ferry/core/caching_allocator.h"
#include "ferry/core/device.h"
#include "ferry/core/dtype.h"
#include "ferry/core/storage.h"

namespace ferry {

/// A copy in flight (Backend::copy_async). Destroying it neither waits for nor cancels the copy.
class CopyEvent {
 public:
  virtual ~CopyEvent() = default;
  /// Blocks the calling thread until the copy is done.
  virtual void synchronize() = 0;
  /// Orders the copy before every kernel queued on the destination device's compute stream from now on, without
  /// blocking the host (cudaStreamWaitEvent).
  virtual void order_before_compute() = 0;
};

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
  /// Free bytes on `device` (for get_max_memory), or nullopt when unknown. Includes the allocator's cached blocks.
  virtual std::optional<std::size_t> free_memory(Device device) const = 0;

  /// Starts a copy on the device's copy stream and returns its event; nullptr means it is already complete (the
  /// default: a synchronous copy). The copy starts after all compute work queued so far, so a block freed by a
  /// finished forward and reused by the copy is never overwritten while a kernel still reads it.
  virtual std::shared_ptr<CopyEvent> copy_async(void* dst, Device dst_device, const void* src, Device src_device,
                                                std::size_t n) {
    copy(dst, dst_device, src, src_device, n);
    return nullptr;
  }
  /// Converts n elements between two float dtypes on `device` (both buffers there). Returns false when this
  /// backend has no kernel for the pair (the caller converts through the host).
  virtual bool convert(const void*, DType, void*, DType, std::size_t, Device) { return false; }
  /// Copies `rows` rows of `width` bytes within `device`, rows `dst_pitch` / `src_pitch` bytes apart (a column
  /// block of a row-major tensor: torch.split on the last dim). Default: one copy per row.
  virtual void copy_rows(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch, std::size_t width,
                         std::size_t rows, Device device) {
    for (std::size_t r = 0; r < rows; ++r)
      copy(static_cast<char*>(dst) + r * dst_pitch, device, static_cast<const char*>(src) + r * src_pitch, device,
           width);
  }
  /// Waits for every kernel and copy queued on `device`.
  virtual void synchronize(Device) {}
  /// Page-locked host memory the device can copy from asynchronously (cudaHostAlloc), or nullptr when this
  /// backend has none.
  virtual std::shared_ptr<Storage> allocate_pinned_host(std::size_t) { return nullptr; }
  /// The caching allocator's counters for `device`, when it has one.
  virtual std::optional<CachingAllocator::Stats> allocator_stats(Device) const { return std::nullopt; }
  /// Returns cached, unused device blocks to the driver (torch.cuda.empty_cache).
  virtual void empty_cache() {}
};

/// Registers `backend` for `kind`, replacing any previous one. Thread-safe.
void register_backend(Device::Kind kind, std::shared_ptr<Backend> backend);
/// The backend for `kind`, or nullptr when none is registered (e.g. CUDA in a build without it).
std::shared_ptr<Backend> find_backend(Device::Kind kind);
/// The backend for `device`; throws ferry::Error saying what is missing ("ferry was built without CUDA").
std::shared_ptr<Backend> backend_for(Device device);

/// Copies n bytes between any two devices with bytes (not meta or disk).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t n);
/// copy_bytes on the copy stream of the device side (Backend::copy_async); nullptr when already complete.
std::shared_ptr<CopyEvent> copy_bytes_async(void* dst, Device dst_device, const void* src, Device src_device,
                                            std::size_t n);
/// Waits for the work queued on `device` (no-op for host devices). torch.cuda.synchronize(device).
void synchronize(Device device);
/// `nbytes` of host memory on cpu that a GPU copies from at full speed (pinned) when the CUDA backend is present
/// with a device, else ordinary host memory; 4096-byte aligned either way (O_DIRECT reads may land in it).
/// Counted against cpu.
std::shared_ptr<Storage> allocate_pinned_host(std::size_t nbytes);
/// allocate_pinned_host as a raw pointer, for allocators that take function pairs (io::StagedReaderOptions).
/// pinned_host_free takes only pointers from pinned_host_alloc (others are ignored).
void* pinned_host_alloc(std::size_t nbytes);
void pinned_host_free(void* p) noexcept;

/// Bytes moved between host and accelerators since the start (or the last reset): what the CLI reports per token.
struct TransferStats {
  uint64_t host_to_device = 0;
  uint64_t device_to_host = 0;
  uint64_t device_to_device = 0;  // between two accelerators (not within one)
};
TransferStats transfer_stats();
void reset_transfer_stats();

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
