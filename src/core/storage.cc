// Storage kinds and their accounting (see include/ferry/core/storage.h).
#include "ferry/core/storage.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/core/mapped_file.h"
#include "ferry/core/memory.h"

namespace ferry {

// Large buffers (weights, activations of long prompts) are placed on 2 MiB boundaries and asked to be backed by
// transparent huge pages where the kernel allows it (THP "madvise" mode is Debian's default): streaming a 2 GiB
// weight set through 4 KiB pages costs half a million TLB misses per decode step and as many page faults on first
// write, 512 times fewer with huge pages. Without THP the advice is a no-op.
void* aligned_host_alloc(std::size_t nbytes, std::size_t min_alignment) {
  constexpr std::size_t kHuge = std::size_t(2) << 20;
  const bool huge = nbytes >= kHuge;
  const std::size_t alignment = std::max(huge ? kHuge : 64, min_alignment);
  // Only the start is placed on a 2 MiB boundary, the size is not rounded up: a partial last 2 MiB stays in small
  // pages, so no tensor holds more physical memory than its bytes (and a 64-byte tail).
  const std::size_t rounded = std::max<std::size_t>(64, (nbytes + 63) / 64 * 64);
  void* p = nullptr;
  if (::posix_memalign(&p, alignment, rounded) != 0 || !p)
    throw Error(ErrorKind::OutOfMemory, "out of host memory allocating " + std::to_string(nbytes) + " bytes", "cpu");
#ifdef MADV_HUGEPAGE
  if (huge) ::madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}

void aligned_host_free(void* p) noexcept { std::free(p); }

std::shared_ptr<Storage> Storage::allocate(Device device, std::size_t nbytes) {
  if (device.is_meta()) return meta(nbytes);
  if (device.is_disk())
    throw Error("cannot allocate tensor bytes on 'disk'", "",
                "disk is a placement for offloaded weights; they are materialised on an execution device");
  return backend_for(device)->allocate(device, nbytes);
}

std::shared_ptr<Storage> Storage::meta(std::size_t nbytes) {
  std::shared_ptr<Storage> s(new Storage);
  s->kind_ = Kind::Meta;
  s->device_ = Device::meta();
  s->nbytes_ = nbytes;
  return s;
}

std::shared_ptr<Storage> Storage::view(std::shared_ptr<const MappedFile> file, std::size_t offset,
                                       std::size_t nbytes) {
  if (offset > file->size() || nbytes > file->size() - offset)
    throw Error("byte range [" + std::to_string(offset) + ", " + std::to_string(offset + nbytes) +
                    ") lies outside the file (" + std::to_string(file->size()) + " bytes)",
                file->path().string());
  std::shared_ptr<Storage> s(new Storage);
  s->kind_ = Kind::MappedView;
  s->device_ = Device::cpu();
  s->nbytes_ = nbytes;
  s->data_ = nbytes ? const_cast<uint8_t*>(file->data() + offset) : nullptr;
  s->file_ = std::move(file);
  detail::record_map(s->device_, static_cast<int64_t>(nbytes));
  return s;
}

std::shared_ptr<Storage> Storage::adopt(Device device, void* data, std::size_t nbytes,
                                        std::function<void(void*)> release) {
  std::shared_ptr<Storage> s(new Storage);
  s->kind_ = Kind::Owned;
  s->device_ = device;
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->release_ = std::move(release);
  detail::record_alloc(device, static_cast<int64_t>(nbytes));
  return s;
}

Storage::~Storage() {
  switch (kind_) {
    case Kind::Owned:
      if (release_) release_(data_);
      detail::record_free(device_, static_cast<int64_t>(nbytes_));
      break;
    case Kind::MappedView:
      detail::record_map(device_, -static_cast<int64_t>(nbytes_));
      break;
    case Kind::Meta:
      break;
  }
}

}  // namespace ferry
