// Thread pool, logging, errors, backends and virtual devices.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <numeric>
#include <vector>

#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/core/memory.h"
#include "ferry/core/tensor.h"
#include "ferry/core/thread_pool.h"
#include "support/error_of.h"

namespace ferry {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int64_t n : {0, 1, 7, 33, 4097, 100000}) {
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    parallel_for(0, n, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, NestedCallsRunInlineAndExceptionsPropagate) {
  std::atomic<int64_t> sum{0};
  parallel_for(0, 8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallel_for(0, 10, 1, [&](int64_t b2, int64_t e2) { sum += e2 - b2; });
  });
  EXPECT_EQ(sum.load(), 80);
  // The chunk holding index 51 throws, whatever the number of threads (one thread runs a single chunk).
  EXPECT_THROW(parallel_for(0, 100, 1, [](int64_t b, int64_t e) {
                 if (b <= 51 && 51 < e) throw Error("boom");
               }),
               Error);
  // The pool still works after an exception.
  std::atomic<int> count{0};
  parallel_for(0, 1000, 1, [&](int64_t b, int64_t e) { count += static_cast<int>(e - b); });
  EXPECT_EQ(count.load(), 1000);
}

TEST(ThreadPool, ResizeAndManyBackToBackJobs) {
  int saved = num_threads();
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  int64_t total = 0;
  for (int rep = 0; rep < 2000; ++rep) {
    std::atomic<int64_t> s{0};
    parallel_for(0, 64, 1, [&](int64_t b, int64_t e) { s += e - b; });
    total += s;
  }
  EXPECT_EQ(total, 2000 * 64);
  EXPECT_THROW(set_num_threads(0), Error);
  set_num_threads(saved);
}

TEST(Logging, CaptureAndLevels) {
  ScopedLogCapture capture(LogLevel::Info);
  log_info("loaded {} tensors", 3);
  log_debug("not captured at info level");
  log_warning("careful");
  log_once(LogLevel::Warning, "only once");
  log_once(LogLevel::Warning, "only once");
  auto msgs = capture.messages();
  ASSERT_EQ(msgs.size(), 3u);
  EXPECT_EQ(msgs[0], "loaded 3 tensors");
  EXPECT_TRUE(capture.contains("careful"));
  EXPECT_FALSE(capture.contains("not captured"));
}

TEST(Error, ComposesWhatWhereHint) {
  Error e("shape mismatch", "model.safetensors: lm_head.weight", "check config.json");
  EXPECT_STREQ(e.what(), "model.safetensors: lm_head.weight: shape mismatch (check config.json)");
  Error outer = Error("bad dtype", "w").with_context("shard-1.safetensors");
  EXPECT_EQ(outer.where(), "shard-1.safetensors: w");
  EXPECT_STREQ(Error("plain").what(), "plain");
}

TEST(Error, KindDefaultsToInvalidValueIsSetAndSurvivesContext) {
  EXPECT_EQ(Error("bad dtype", "w", "use f32").kind(), ErrorKind::InvalidValue);
  const Error missing(ErrorKind::NotFound, "checkpoint not found", "/x", "pass a folder");
  EXPECT_EQ(missing.kind(), ErrorKind::NotFound);
  EXPECT_STREQ(missing.what(), "/x: checkpoint not found (pass a folder)");  // the kind is not part of the message
  const Error outer = missing.with_context("from_pretrained");
  EXPECT_EQ(outer.kind(), ErrorKind::NotFound);
  EXPECT_EQ(outer.where(), "from_pretrained: /x");
  EXPECT_EQ(Error(ErrorKind::OutOfMemory, "budget too small").with_context("").kind(), ErrorKind::OutOfMemory);
  EXPECT_EQ(Error(ErrorKind::OutOfMemory, "budget too small").with_context("plan").kind(), ErrorKind::OutOfMemory);
  // Thrown and caught by value or as std::exception, the kind travels with it.
  try {
    throw outer;
  } catch (const std::exception& e) {
    const auto* err = dynamic_cast<const Error*>(&e);
    ASSERT_NE(err, nullptr);
    EXPECT_EQ(err->kind(), ErrorKind::NotFound);
  }
  EXPECT_STREQ(error_kind_name(ErrorKind::InvalidValue), "invalid_value");
  EXPECT_STREQ(error_kind_name(ErrorKind::NotFound), "not_found");
  EXPECT_STREQ(error_kind_name(ErrorKind::OutOfMemory), "out_of_memory");
  EXPECT_EQ(error_kind_from_errno(ENOENT), ErrorKind::NotFound);
  EXPECT_EQ(error_kind_from_errno(ENOTDIR), ErrorKind::NotFound);
  EXPECT_EQ(error_kind_from_errno(EACCES), ErrorKind::InvalidValue);
  EXPECT_EQ(error_kind_from_errno(EISDIR), ErrorKind::InvalidValue);
}

TEST(Backend, CudaWithoutAGpuIsAClearError) {
  auto cuda = find_backend(Device::Kind::CUDA);
  if (cuda && cuda->device_count() > 0) GTEST_SKIP() << "a GPU is present";
  try {
    Tensor::zeros({2}, DType::F32, Device::cuda(0));
    FAIL();
  } catch (const Error& e) {
    const std::string want = cuda ? "no such device" : "built without the CUDA backend";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(Backend, CudaRoundTripAndAccounting) {
  auto cuda = find_backend(Device::Kind::CUDA);
  if (!cuda || cuda->device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  auto before = memory_stats(Device::cuda(0)).current;
  Tensor g = a.to(Device::cuda(0));
  EXPECT_EQ(memory_stats(Device::cuda(0)).current, before + 16);
  EXPECT_EQ(g.to(DType::BF16).to(Device::cpu()).to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_TRUE(cuda->free_memory(Device::cuda(0)).has_value());
}

class VirtualDevices : public ::testing::Test {
 protected:
  void SetUp() override { enable_virtual_devices({.count = 2, .capacity_bytes = 4096}); }
  void TearDown() override { disable_virtual_devices(); }
};

TEST_F(VirtualDevices, HaveIdentityCapacityAndAccounting) {
  EXPECT_EQ(virtual_device_count(), 2);
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor v = a.to(Device::virt(1));
  EXPECT_EQ(v.device(), Device::virt(1));
  EXPECT_EQ(memory_stats(Device::virt(1)).current, 12);
  EXPECT_EQ(memory_stats(Device::virt(0)).current, 0);
  EXPECT_EQ(v.to(Device::virt(0)).to(Device::cpu()).to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(*find_backend(Device::Kind::Virtual)->free_memory(Device::virt(1)), 4096u - 12);
  EXPECT_EQ(test::error_kind_of([] { Tensor::empty({2000}, DType::F32, Device::virt(0)); }),  // 8000 bytes > capacity
            ErrorKind::OutOfMemory);
  EXPECT_EQ(test::error_kind_of([] { Tensor::empty({1}, DType::F32, Device::virt(2)); }),  // no such device
            ErrorKind::InvalidValue);
  auto accels = accelerator_devices();
  if (!find_backend(Device::Kind::CUDA)) {
    EXPECT_EQ(accels, (std::vector<Device>{Device::virt(0), Device::virt(1)}));
  }
}

TEST_F(VirtualDevices, ThrottledCopiesTakeTheirTime) {
  enable_virtual_devices({.count = 1, .capacity_bytes = 1 << 20, .copy_bandwidth_bytes_per_s = 1e6});
  Tensor a = Tensor::zeros({10000}, DType::F32);  // 40 kB at 1 MB/s = 40 ms
  auto t0 = std::chrono::steady_clock::now();
  Tensor v = a.to(Device::virt(0));
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ms, 39.0);  // a lower bound only: the emulated link may never be faster than asked
}

TEST(VirtualDevicesOff, AreNeverUsedSilently) {
  disable_virtual_devices();
  EXPECT_EQ(virtual_device_count(), 0);
  EXPECT_THROW(Tensor::zeros({1}, DType::F32, Device::virt(0)), Error);
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

// A resize right after another one must not wait for workers that have not started running yet.
TEST(ThreadPool, ImmediateResizesDoNotDeadlock) {
  const int saved = num_threads();
  for (int i = 0; i < 200; ++i) {
    set_num_threads(1 + i % 4);
    set_num_threads(1 + (i + 1) % 3);
  }
  std::atomic<int> n{0};
  parallel_for(0, 100, 1, [&](int64_t b, int64_t e) { n += static_cast<int>(e - b); });
  EXPECT_EQ(n.load(), 100);
  set_num_threads(saved);
}

}  // namespace
}  // namespace ferry
