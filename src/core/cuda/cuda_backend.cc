// The CUDA backend's memory half: a caching allocator per device, host<->device and device<->device copies (the
// asynchronous ones on a copy stream per device, ordered with events), pinned host memory for staging, device
// count and free memory (for get_max_memory). Built only with FERRY_CUDA; kernels live in src/ops/cuda (and the
// dtype conversion in convert.cu beside this file). Registered by the backend registry on first use (backend.cc).
//
// Streams: kernels run on each device's legacy default stream (the "compute stream"); asynchronous copies run on a
// non-blocking copy stream, so they overlap kernels. Before each asynchronous copy the copy stream waits for the
// compute work queued so far: a block that a finished forward freed and the allocator hands to the copy is
// therefore never overwritten while a queued kernel still reads it. Consumers wait for a copy with its event
// (CopyEvent::order_before_compute) before a kernel reads what it wrote.
#include <cuda_runtime_api.h>

#include <array>
#include <memory>
#include <mutex>
#include <string>

#include "ferry/core/backend.h"
#include "ferry/core/caching_allocator.h"
#include "ferry/core/error.h"

namespace ferry::detail {

bool cuda_convert(const void* src, DType src_type, void* dst, DType dst_type, std::size_t n);  // convert.cu

namespace {

constexpr int kMaxDevices = 16;

void check(cudaError_t err, const char* what, Device device) {
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear a non-sticky error so the next call does not report it again
    // cudaErrorMemoryAllocation (a cudaMalloc, cudaHostAlloc or context that did not fit) is a lack of memory.
    throw Error(err == cudaErrorMemoryAllocation ? ErrorKind::OutOfMemory : ErrorKind::InvalidValue,
                std::string(what) + " failed: " + cudaGetErrorString(err), device.str(),
                "check the GPU with nvidia-smi; ferry needs a CUDA 13 driver");
  }
}

std::string mib(std::size_t bytes) { return std::to_string((bytes + (1u << 19)) >> 20) + " MiB"; }

class CudaCopyEvent final : public CopyEvent {
 public:
  CudaCopyEvent(cudaEvent_t event, int device) : event_(event), device_(device) {}
  ~CudaCopyEvent() override { cudaEventDestroy(event_); }
  void synchronize() override { check(cudaEventSynchronize(event_), "cudaEventSynchronize", Device::cuda(device_)); }
  void order_before_compute() override {
    check(cudaSetDevice(device_), "cudaSetDevice", Device::cuda(device_));
    check(cudaStreamWaitEvent(cudaStreamLegacy, event_, 0), "cudaStreamWaitEvent", Device::cuda(device_));
  }

 private:
  cudaEvent_t event_;
  int device_;
};

struct PerDevice {
  std::once_flag init;
  std::shared_ptr<CachingAllocator> allocator;
  cudaStream_t copy_stream = nullptr;
  std::mutex copy_mu;  // one thread at a time records the compute fence and queues on the copy stream
};

class CudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda"; }

  std::shared_ptr<Storage> allocate(Device device, std::size_t nbytes) override {
    PerDevice& d = state(device);
    void* p = d.allocator->allocate(nbytes);
    if (!p) {
      std::size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      cudaGetLastError();
      throw Error(ErrorKind::OutOfMemory,
                  "out of memory: cannot allocate " + mib(nbytes) + " (" + std::to_string(nbytes) + " bytes); " +
                      mib(free) + " of " + mib(total) + " free",
                  device.str(), "lower this GPU's max_memory (--max-memory " + std::to_string(device.index) +
                                    "=...) so more layers are offloaded, or use a shorter context");
    }
    std::weak_ptr<CachingAllocator> pool = d.allocator;
    return Storage::adopt(device, p, nbytes, [pool](void* q) {
      if (auto a = pool.lock()) a->deallocate(q);
    });
  }

  void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t n) override {
    Device gpu = dst_device.is_cuda() ? dst_device : src_device;
    check(cudaSetDevice(gpu.index), "cudaSetDevice", gpu);
    if (dst_device.is_cuda() && src_device.is_cuda() && dst_device != src_device) enable_peer(dst_device, src_device);
    check(cudaMemcpy(dst, src, n, cudaMemcpyDefault), "cudaMemcpy", gpu);
  }

  std::shared_ptr<CopyEvent> copy_async(void* dst, Device dst_device, const void* src, Device src_device,
                                        std::size_t n) override {
    Device gpu = dst_device.is_cuda() ? dst_device : src_device;
    PerDevice& d = state(gpu);
    check(cudaSetDevice(gpu.index), "cudaSetDevice", gpu);
    if (dst_device.is_cuda() && src_device.is_cuda() && dst_device != src_device) enable_peer(dst_device, src_device);
    std::lock_guard lock(d.copy_mu);
    cudaEvent_t fence = nullptr, done = nullptr;
    check(cudaEventCreateWithFlags(&fence, cudaEventDisableTiming), "cudaEventCreate", gpu);
    check(cudaEventRecord(fence, cudaStreamLegacy), "cudaEventRecord", gpu);
    check(cudaStreamWaitEvent(d.copy_stream, fence, 0), "cudaStreamWaitEvent", gpu);
    cudaEventDestroy(fence);  // released once the wait is satisfied
    check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, d.copy_stream), "cudaMemcpyAsync", gpu);
    check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate", gpu);
    check(cudaEventRecord(done, d.copy_stream), "cudaEventRecord", gpu);
    return std::make_shared<CudaCopyEvent>(done, gpu.index);
  }

  bool convert(const void* src, DType src_type, void* dst, DType dst_type, std::size_t n, Device device) override {
    check(cudaSetDevice(device.index), "cudaSetDevice", device);
    return cuda_convert(src, src_type, dst, dst_type, n);
  }

  void copy_rows(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch, std::size_t width,
                 std::size_t rows, Device device) override {
    if (width == 0 || rows == 0) return;
    check(cudaSetDevice(device.index), "cudaSetDevice", device);
    check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice, cudaStreamLegacy),
          "cudaMemcpy2DAsync", device);
  }

  void synchronize(Device device) override {
    check(cudaSetDevice(device.index), "cudaSetDevice", device);
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", device);
  }

  std::shared_ptr<Storage> allocate_pinned_host(std::size_t nbytes) override {
    void* p = nullptr;
    if (cudaHostAlloc(&p, nbytes ? nbytes : 1, cudaHostAllocPortable) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;  // the caller falls back to pageable memory
    }
    return Storage::adopt(Device::cpu(), p, nbytes, [](void* q) { cudaFreeHost(q); });
  }

  std::optional<CachingAllocator::Stats> allocator_stats(Device device) const override {
    if (device.index < 0 || device.index >= kMaxDevices || !devices_[device.index].allocator) return std::nullopt;
    return devices_[device.index].allocator->stats();
  }

  void empty_cache() override {
    for (auto& d : devices_)
      if (d.allocator) d.allocator->empty_cache();
  }

  int device_count() const override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }

  std::optional<std::size_t> free_memory(Device device) const override {
    std::size_t free = 0, total = 0;
    if (cudaSetDevice(device.index) != cudaSuccess || cudaMemGetInfo(&free, &total) != cudaSuccess) {
      cudaGetLastError();
      return std::nullopt;
    }
    if (auto s = allocator_stats(device)) free += s->cached;  // cached blocks are ours to reuse
    return free;
  }

 private:
  PerDevice& state(Device device) {
    if (device.index < 0 || device.index >= kMaxDevices)
      throw Error("no such device", device.str(), "ferry supports cuda:0 .. cuda:15");
    PerDevice& d = devices_[device.index];
    std::call_once(d.init, [&] {
      check(cudaSetDevice(device.index), "cudaSetDevice", device);
      check(cudaStreamCreateWithFlags(&d.copy_stream, cudaStreamNonBlocking), "cudaStreamCreate", device);
      const int index = device.index;
      d.allocator = std::make_shared<CachingAllocator>(
          [index](std::size_t n) -> void* {
            void* p = nullptr;
            if (cudaSetDevice(index) != cudaSuccess || cudaMalloc(&p, n) != cudaSuccess) {
              cudaGetLastError();
              return nullptr;
            }
            return p;
          },
          [index](void* p) {
            cudaSetDevice(index);
            cudaFree(p);
          });
    });
    return d;
  }

  void enable_peer(Device a, Device b) {
    std::lock_guard lock(peer_mu_);
    auto& done = peer_[a.index][b.index];
    if (done) return;
    done = true;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, a.index, b.index) == cudaSuccess && can) {
      cudaSetDevice(a.index);
      cudaDeviceEnablePeerAccess(b.index, 0);
      cudaSetDevice(b.index);
      cudaDeviceEnablePeerAccess(a.index, 0);
    }
    cudaGetLastError();  // "already enabled" is fine; without peer access cudaMemcpy goes through the host
    cudaSetDevice(a.index);
  }

  std::array<PerDevice, kMaxDevices> devices_;
  std::mutex peer_mu_;
  std::array<std::array<bool, kMaxDevices>, kMaxDevices> peer_{};
};

}  // namespace

std::shared_ptr<Backend> make_cuda_backend() { return std::make_shared<CudaBackend>(); }

}  // namespace ferry::detail
