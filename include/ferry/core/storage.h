// Storage: a block of bytes on one device, shared by the tensors that view it.
//
// Kinds:
//   Owned      bytes allocated by a backend (host memory aligned to 64 bytes, pinned host, CUDA, virtual);
//              counted in memory_stats(device) for as long as the Storage lives.
//   MappedView a read-only window into a MappedFile (a checkpoint or offload .dat); keeps the mapping alive;
//              counted as `mapped`, not as an allocation.
//   Meta       no bytes at all (data() == nullptr); a meta tensor has a shape and a dtype only.
// Storage is not copyable: copying bytes can fail (out of memory), so it is always explicit (Tensor::clone).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "ferry/core/device.h"

namespace ferry {

class MappedFile;

class Storage {
 public:
  enum class Kind { Owned, MappedView, Meta };

  /// Allocates `nbytes` on `device` through its backend (see backend.h). Throws ferry::Error for disk,
  /// for a device kind whose backend is not built, or when the device is out of memory.
  static std::shared_ptr<Storage> allocate(Device device, std::size_t nbytes);
  /// A storage of `nbytes` on meta: no bytes are allocated.
  static std::shared_ptr<Storage> meta(std::size_t nbytes);
  /// A read-only view of [offset, offset + nbytes) of `file`. Throws if the range is outside the file.
  static std::shared_ptr<Storage> view(std::shared_ptr<const MappedFile> file, std::size_t offset,
                                       std::size_t nbytes);
  /// For backends: wraps memory they allocated; `release` frees it. Counted against `device`.
  static std::shared_ptr<Storage> adopt(Device device, void* data, std::size_t nbytes,
                                        std::function<void(void*)> release);

  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  Kind kind() const noexcept { return kind_; }
  Device device() const noexcept { return device_; }
  std::size_t nbytes() const noexcept { return nbytes_; }
  /// nullptr for meta. Writing through a MappedView is undefined: check read_only().
  void* data() const noexcept { return data_; }
  bool read_only() const noexcept { return kind_ == Kind::MappedView; }
  /// The mapped file behind a MappedView, else nullptr.
  const std::shared_ptr<const MappedFile>& file() const noexcept { return file_; }

 private:
  Storage() = default;
  Kind kind_ = Kind::Meta;
  Device device_ = Device::meta();
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  std::function<void(void*)> release_;
  std::shared_ptr<const MappedFile> file_;
};

/// Host allocation helpers: 64-byte aligned (cache line; enough for AVX-512 loads), or `min_alignment` when larger
/// (4096 for O_DIRECT buffers); 2 MiB-aligned with transparent huge pages from 2 MiB up. Throws when out of memory.
void* aligned_host_alloc(std::size_t nbytes, std::size_t min_alignment = 64);
void aligned_host_free(void* p) noexcept;

}  // namespace ferry
