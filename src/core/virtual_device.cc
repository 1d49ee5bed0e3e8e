// Virtual accelerators for tests: host memory with its own device identity, capacity, accounting and an optional
// throttled copy bandwidth (see include/ferry/core/backend.h). Never enabled unless asked for.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/core/memory.h"

namespace ferry {
namespace {

class VirtualBackend final : public Backend {
 public:
  explicit VirtualBackend(VirtualDeviceOptions o) : opts_(o) {}
  std::string name() const override { return "virtual"; }

  std::shared_ptr<Storage> allocate(Device device, std::size_t nbytes) override {
    auto used = static_cast<std::size_t>(memory_stats(device).current);
    if (used + nbytes > opts_.capacity_bytes)
      throw Error(ErrorKind::OutOfMemory,
                  "out of memory: cannot allocate " + std::to_string(nbytes) + " bytes with " +
                      std::to_string(used) + " of " + std::to_string(opts_.capacity_bytes) + " in use",
                  device.str(), "give this device a smaller max_memory budget");
    return Storage::adopt(device, aligned_host_alloc(nbytes), nbytes, aligned_host_free);
  }

  void copy(void* dst, Device, const void* src, Device, std::size_t n) override {
    auto start = std::chrono::steady_clock::now();
    std::memcpy(dst, src, n);
    if (opts_.copy_bandwidth_bytes_per_s > 0) {
      auto want = std::chrono::duration<double>(static_cast<double>(n) / opts_.copy_bandwidth_bytes_per_s);
      std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::nanoseconds>(want));
    }
  }

  int device_count() const override { return opts_.count; }

  std::optional<std::size_t> free_memory(Device device) const override {
    auto used = static_cast<std::size_t>(memory_stats(device).current);
    return used >= opts_.capacity_bytes ? 0 : opts_.capacity_bytes - used;
  }

 private:
  VirtualDeviceOptions opts_;
};

std::once_flag env_once;

}  // namespace

void enable_virtual_devices(const VirtualDeviceOptions& options) {
  if (options.count < 1) throw Error("virtual device count must be at least 1");
  register_backend(Device::Kind::Virtual, std::make_shared<VirtualBackend>(options));
}

void disable_virtual_devices() { register_backend(Device::Kind::Virtual, nullptr); }

int virtual_device_count() {
  auto b = find_backend(Device::Kind::Virtual);
  return b ? b->device_count() : 0;
}

// FERRY_VIRTUAL_DEVICES=N or N:capacity_bytes
void install_virtual_devices_from_env() {
  std::call_once(env_once, [] {
    const char* env = std::getenv("FERRY_VIRTUAL_DEVICES");
    if (!env || !*env) return;
    std::string s(env);
    VirtualDeviceOptions o;
    try {
      auto colon = s.find(':');
      o.count = std::stoi(s.substr(0, colon));
      if (colon != std::string::npos) o.capacity_bytes = std::stoull(s.substr(colon + 1));
    } catch (const std::exception&) {
      throw Error("FERRY_VIRTUAL_DEVICES='" + s + "' is not N or N:capacity_bytes");
    }
    enable_virtual_devices(o);
  });
}

}  // namespace ferry
