// Backend registry and the cpu backend (see include/ferry/core/backend.h).
#include "ferry/core/backend.h"

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "ferry/core/error.h"

namespace ferry {
#ifdef FERRY_HAVE_CUDA
namespace detail {
std::shared_ptr<Backend> make_cuda_backend();  // cuda/cuda_backend.cc
}
#endif

namespace {

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::shared_ptr<Storage> allocate(Device device, std::size_t nbytes) override {
    return Storage::adopt(device, aligned_host_alloc(nbytes), nbytes, aligned_host_free);
  }
  void copy(void* dst, Device, const void* src, Device, std::size_t n) override {
    if (n) std::memcpy(dst, src, n);
  }
  int device_count() const override { return 1; }
  std::optional<std::size_t> free_memory(Device) const override { return std::nullopt; }
};

struct Registry {
  std::mutex mu;
  std::array<std::shared_ptr<Backend>, 5> backends;
  Registry() {
    backends[static_cast<int>(Device::Kind::CPU)] = std::make_shared<CpuBackend>();
#ifdef FERRY_HAVE_CUDA
    backends[static_cast<int>(Device::Kind::CUDA)] = detail::make_cuda_backend();
#endif
  }
};

Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

void install_virtual_devices_from_env();  // virtual_device.cc

void register_backend(Device::Kind kind, std::shared_ptr<Backend> backend) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.backends[static_cast<int>(kind)] = std::move(backend);
}

std::shared_ptr<Backend> find_backend(Device::Kind kind) {
  install_virtual_devices_from_env();
  auto& r = registry();
  std::lock_guard lock(r.mu);
  return r.backends[static_cast<int>(kind)];
}

std::shared_ptr<Backend> backend_for(Device device) {
  if (device.is_meta() || device.is_disk())
    throw Error("device '" + device.str() + "' holds no bytes", "", "materialise the tensor on cpu or a GPU first");
  auto b = find_backend(device.kind);
  if (!b) {
    if (device.is_cuda())
      throw Error("ferry was built without the CUDA backend", device.str(),
                  "rebuild with -DFERRY_CUDA=ON on a machine with nvcc, or use a cpu device map");
    throw Error("virtual devices are not enabled", device.str(),
                "call ferry::enable_virtual_devices() or set FERRY_VIRTUAL_DEVICES=N (tests only)");
  }
  if (device.index >= b->device_count())
    throw Error("no such device: " + std::to_string(b->device_count()) + " " + b->name() + " device(s) present",
                device.str());
  return b;
}

namespace {

std::atomic<uint64_t> g_h2d{0}, g_d2h{0}, g_d2d{0};

// Only copies that cross a bus count: host <-> accelerator, and between two different accelerators.
void record_transfer(Device dst, Device src, std::size_t n) {
  const bool dst_host = dst.is_cpu(), src_host = src.is_cpu();
  if (dst_host && src_host) return;
  if (src_host) g_h2d += n;
  else if (dst_host) g_d2h += n;
  else if (dst != src) g_d2d += n;
}

}  // namespace

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t n) {
  if (n == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, n);
    return;
  }
  // The side that is not plain cpu decides how bytes move (a GPU copy engine, a throttled virtual link).
  Device owner = dst_device.is_cpu() ? src_device : dst_device;
  backend_for(owner)->copy(dst, dst_device, src, src_device, n);
  record_transfer(dst_device, src_device, n);
}

std::shared_ptr<CopyEvent> copy_bytes_async(void* dst, Device dst_device, const void* src, Device src_device,
                                            std::size_t n) {
  if (n == 0) return nullptr;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, n);
    return nullptr;
  }
  Device owner = dst_device.is_cpu() ? src_device : dst_device;
  auto event = backend_for(owner)->copy_async(dst, dst_device, src, src_device, n);
  record_transfer(dst_device, src_device, n);
  return event;
}

void synchronize(Device device) {
  if (device.is_cpu() || device.is_meta() || device.is_disk()) return;
  backend_for(device)->synchronize(device);
}

std::shared_ptr<Storage> allocate_pinned_host(std::size_t nbytes) {
  if (auto cuda = find_backend(Device::Kind::CUDA); cuda && cuda->device_count() > 0)
    if (auto s = cuda->allocate_pinned_host(nbytes)) return s;
  return Storage::adopt(Device::cpu(), aligned_host_alloc(nbytes, 4096), nbytes, aligned_host_free);
}

namespace {
struct PinnedBlocks {
  std::mutex mu;
  std::unordered_map<void*, std::shared_ptr<Storage>> live;
};
PinnedBlocks& pinned_blocks() {
  static auto* p = new PinnedBlocks;
  return *p;
}
}  // namespace

void* pinned_host_alloc(std::size_t nbytes) {
  auto s = allocate_pinned_host(nbytes);
  void* p = s->data();
  auto& b = pinned_blocks();
  std::lock_guard lock(b.mu);
  b.live.emplace(p, std::move(s));
  return p;
}

void pinned_host_free(void* p) noexcept {
  std::shared_ptr<Storage> s;
  auto& b = pinned_blocks();
  {
    std::lock_guard lock(b.mu);
    auto it = b.live.find(p);
    if (it == b.live.end()) return;
    s = std::move(it->second);
    b.live.erase(it);
  }
}

TransferStats transfer_stats() { return {g_h2d.load(), g_d2h.load(), g_d2d.load()}; }

void reset_transfer_stats() {
  g_h2d = 0;
  g_d2h = 0;
  g_d2d = 0;
}

std::vector<Device> accelerator_devices() {
  std::vector<Device> out;
  if (auto cuda = find_backend(Device::Kind::CUDA))
    for (int i = 0; i < cuda->device_count(); ++i) out.push_back(Device::cuda(i));
  if (out.empty())
    if (auto virt = find_backend(Device::Kind::Virtual))
      for (int i = 0; i < virt->device_count(); ++i) out.push_back(Device::virt(i));
  return out;
}

}  // namespace ferry
