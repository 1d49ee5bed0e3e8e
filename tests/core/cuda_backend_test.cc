// The CUDA backend's memory half on a real GPU: allocations through the caching allocator, the out-of-memory error,
// synchronous and asynchronous copies, pinned host memory and dtype conversion on the device. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "ferry/core/backend.h"
#include "ferry/core/tensor.h"
#include "support/cuda_device.h"
#include "support/error_of.h"

namespace ferry {
namespace {

TEST(CudaBackend, RoundTripThroughTheDevice) {
  FERRY_REQUIRE_CUDA();
  std::vector<float> v(1000);
  std::iota(v.begin(), v.end(), -3.5f);
  Tensor host = Tensor::from_vector(v, {10, 100});
  Tensor gpu = host.to(Device::cuda(0));
  EXPECT_EQ(gpu.device(), Device::cuda(0));
  EXPECT_EQ(gpu.to_vector<float>(), v);
  EXPECT_EQ(gpu.slice(3, 4).to_vector<float>(), std::vector<float>(v.begin() + 300, v.begin() + 400));
  EXPECT_EQ(gpu.clone().to_vector<float>(), v);
}

TEST(CudaBackend, ConvertsOnTheDeviceExactlyAsTheHost) {
  FERRY_REQUIRE_CUDA();
  std::vector<float> v;
  for (int i = 0; i < 4099; ++i) v.push_back(std::ldexp(float(i % 97) - 48.3f, (i % 21) - 10));
  Tensor host = Tensor::from_vector(v, {int64_t(v.size())});
  for (DType t : {DType::F16, DType::BF16}) {
    Tensor want = host.to(t);
    Tensor got = host.to(Device::cuda(0)).to(t);
    ASSERT_EQ(got.device(), Device::cuda(0));
    EXPECT_EQ(std::memcmp(want.raw_data(), got.to(Device::cpu()).raw_data(), want.nbytes()), 0) << dtype_name(t);
    EXPECT_EQ(got.to(DType::F32).to_vector<float>(), want.to(DType::F32).to_vector<float>()) << dtype_name(t);
  }
  // copy_from between dtypes on the device (f32 activations into a bf16 cache)
  Tensor cache = Tensor::zeros({int64_t(v.size())}, DType::BF16, Device::cuda(0));
  cache.copy_from(host.to(Device::cuda(0)));
  EXPECT_EQ(cache.to(DType::F32).to_vector<float>(), host.to(DType::BF16).to(DType::F32).to_vector<float>());
}

TEST(CudaBackend, AsyncCopyFromPinnedMemory) {
  FERRY_REQUIRE_CUDA();
  const std::size_t n = 8u << 20;
  auto pinned = allocate_pinned_host(n);
  auto* bytes = static_cast<uint8_t*>(pinned->data());
  for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 131 + 7);
  Tensor dst = Tensor::empty({int64_t(n)}, DType::U8, Device::cuda(0));
  const auto before = transfer_stats().host_to_device;
  auto event = copy_bytes_async(dst.raw_data(), Device::cuda(0), bytes, Device::cpu(), n);
  ASSERT_NE(event, nullptr);
  event->order_before_compute();
  event->synchronize();
  EXPECT_EQ(transfer_stats().host_to_device - before, n);
  std::vector<uint8_t> back = dst.to_vector<uint8_t>();
  EXPECT_EQ(std::memcmp(back.data(), bytes, n), 0);
}

TEST(CudaBackend, OutOfMemoryIsAFerryErrorNamingDeviceAndSizes) {
  FERRY_REQUIRE_CUDA();
  const std::string msg = test::error_of([] { Tensor::empty({int64_t(1) << 50}, DType::U8, Device::cuda(0)); });
  EXPECT_EQ(test::error_kind_of([] { Tensor::empty({int64_t(1) << 50}, DType::U8, Device::cuda(0)); }),
            ErrorKind::OutOfMemory);
  EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("free"), std::string::npos) << msg;
  EXPECT_NE(msg.find("max_memory"), std::string::npos) << msg;
  // The device is still usable afterwards.
  EXPECT_EQ(Tensor::full({4}, 2.0, DType::F32, Device::cuda(0)).to_vector<float>(), std::vector<float>(4, 2.0f));
}

TEST(CudaBackend, AllocatorDoesNotGrowOverRepeatedAllocations) {
  FERRY_REQUIRE_CUDA();
  auto backend = find_backend(Device::Kind::CUDA);
  auto round = [] {
    std::vector<Tensor> keep;
    for (int64_t n : {4096, 11008, 32000, 4096 * 7}) keep.push_back(Tensor::empty({n}, DType::F32, Device::cuda(0)));
  };
  round();
  const auto first = backend->allocator_stats(Device::cuda(0)).value();
  for (int i = 0; i < 100; ++i) round();
  const auto later = backend->allocator_stats(Device::cuda(0)).value();
  EXPECT_EQ(later.raw_allocs, first.raw_allocs);
  EXPECT_GE(later.hits, first.hits + 400);
  // Free memory counts cached blocks as free.
  EXPECT_TRUE(backend->free_memory(Device::cuda(0)).has_value());
}

}  // namespace
}  // namespace ferry
