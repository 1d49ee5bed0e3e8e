// The CUDA backend's memory half: device allocations, host<->device and device<->device copies, device count
// and free memory (for get_max_memory). Built only with FERRY_CUDA (files under cuda/ are skipped otherwise);
// kernels live in src/ops/cuda. Registered by the backend registry on first use (backend.cc).
#include <cuda_runtime_api.h>

#include <string>

#include "ferry/core/backend.h"
#include "ferry/core/error.h"

namespace ferry::detail {
namespace {

void check(cudaError_t err, const char* what, Device device) {
  if (err != cudaSuccess)
    throw Error(std::string(what) + " failed: " + cudaGetErrorString(err), device.str());
}

class CudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda"; }

  std::shared_ptr<Storage> allocate(Device device, std::size_t nbytes) override {
    check(cudaSetDevice(device.index), "cudaSetDevice", device);
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, nbytes ? nbytes : 1);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky-free error state
      std::size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      throw Error("out of memory: cannot allocate " + std::to_string(nbytes) + " bytes (" + std::to_string(free) +
                      " of " + std::to_string(total) + " free)",
                  device.str(), "lower this GPU's max_memory so more layers are offloaded");
    }
    check(err, "cudaMalloc", device);
    const int index = device.index;
    return Storage::adopt(device, p, nbytes, [index](void* q) {
      cudaSetDevice(index);
      cudaFree(q);
    });
  }

  void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t n) override {
    Device gpu = dst_device.is_cuda() ? dst_device : src_device;
    check(cudaSetDevice(gpu.index), "cudaSetDevice", gpu);
    check(cudaMemcpy(dst, src, n, cudaMemcpyDefault), "cudaMemcpy", gpu);
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
    return free;
  }
};

}  // namespace

std::shared_ptr<Backend> make_cuda_backend() { return std::make_shared<CudaBackend>(); }

}  // namespace ferry::detail
