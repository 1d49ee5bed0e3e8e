// KvCache: appending, growth with contents kept, reserve, crop, reset, f16 storage, device and shape checks, and how
// it travels as the "past_key_values" Value.
#include "ferry/models/kv_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "ferry/core/backend.h"
#include "ferry/core/error.h"

namespace ferry::models {
namespace {

using ::testing::HasSubstr;

struct VirtualDevices {
  VirtualDevices() { enable_virtual_devices(VirtualDeviceOptions{}); }
  ~VirtualDevices() { disable_virtual_devices(); }
};

// [t, h, d] filled with start, start + 1, ...
Tensor iota(int64_t t, int64_t h, int64_t d, float start) {
  std::vector<float> v(static_cast<std::size_t>(t * h * d));
  std::iota(v.begin(), v.end(), start);
  return Tensor::from_vector(v, {t, h, d});
}

TEST(KvCache, UpdateAppendsAndReturnsEverythingSoFar) {
  KvCache cache(2);
  EXPECT_EQ(cache.seq_length(), 0);
  EXPECT_FALSE(cache.device(0).has_value());
  auto [k1, v1] = cache.update(0, iota(3, 2, 4, 0), iota(3, 2, 4, 100));
  EXPECT_EQ(k1.shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(cache.seq_length(0), 3);
  EXPECT_EQ(cache.seq_length(1), 0);
  EXPECT_EQ(cache.device(0), Device::cpu());
  auto [k2, v2] = cache.update(0, iota(1, 2, 4, 24), iota(1, 2, 4, 124));
  EXPECT_EQ(k2.shape(), (Shape{4, 2, 4}));
  EXPECT_EQ(k2.to_vector<float>(), iota(4, 2, 4, 0).to_vector<float>());
  EXPECT_EQ(v2.to_vector<float>(), iota(4, 2, 4, 100).to_vector<float>());
}

TEST(KvCache, TheSequenceLengthIsTheLongestLayers) {
  // On a rank of a pipeline only its own layers hold keys: layer 0 may be empty there.
  KvCache cache(3);
  cache.update(2, iota(5, 2, 4, 0), iota(5, 2, 4, 0));
  EXPECT_EQ(cache.seq_length(0), 0);
  EXPECT_EQ(cache.seq_length(), 5);
  cache.crop(3);
  EXPECT_EQ(cache.seq_length(), 3);
}

TEST(KvCache, GrowingKeepsContents) {
  KvCache cache(1);
  for (int i = 0; i < 40; ++i) cache.update(0, iota(1, 1, 2, 2.0f * i), iota(1, 1, 2, -2.0f * i));  // past 16, 32
  auto [k, v] = cache.update(0, iota(5, 1, 2, 80), iota(5, 1, 2, 0));
  EXPECT_EQ(cache.seq_length(), 45);
  EXPECT_EQ(k.to_vector<float>(), iota(45, 1, 2, 0).to_vector<float>());
  EXPECT_GE(cache.nbytes(), std::size_t{2 * 45 * 2 * 4});
}

TEST(KvCache, ReserveAllocatesOnceForTheWholeGeneration) {
  KvCache cache(1);
  cache.reserve(100);
  cache.update(0, iota(1, 2, 4, 0), iota(1, 2, 4, 0));
  const std::size_t bytes = cache.nbytes();
  EXPECT_EQ(bytes, std::size_t{2 * 100 * 2 * 4 * 4});
  for (int i = 0; i < 99; ++i) cache.update(0, iota(1, 2, 4, 0), iota(1, 2, 4, 0));
  EXPECT_EQ(cache.nbytes(), bytes);
  EXPECT_THROW(cache.reserve(-1), Error);
}

TEST(KvCache, CropAndReset) {
  KvCache cache(2);
  cache.update(0, iota(6, 1, 2, 0), iota(6, 1, 2, 0));
  cache.update(1, iota(6, 1, 2, 0), iota(6, 1, 2, 0));
  cache.crop(4);
  EXPECT_EQ(cache.seq_length(0), 4);
  EXPECT_EQ(cache.seq_length(1), 4);
  auto [k, v] = cache.update(0, iota(1, 1, 2, 50), iota(1, 1, 2, 50));
  EXPECT_EQ(k.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 50, 51}));
  cache.crop(100);
  EXPECT_EQ(cache.seq_length(0), 5);
  cache.reset();
  EXPECT_EQ(cache.seq_length(0), 0);
  EXPECT_EQ(cache.nbytes(), 0u);
  EXPECT_THROW(cache.crop(-1), Error);
}

TEST(KvCache, HalfPrecisionStorage) {
  KvCache cache(1, DType::F16);
  auto [k, v] = cache.update(0, iota(2, 1, 2, 0.5f), iota(2, 1, 2, 1000.25f));
  EXPECT_EQ(k.dtype(), DType::F16);
  EXPECT_EQ(k.to_vector<float>(), (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}));
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{1000.0f, 1001.0f, 1002.0f, 1003.0f}));  // f16 rounding
  EXPECT_EQ(cache.nbytes(), std::size_t{2 * 16 * 2 * 2});
  EXPECT_THROW(KvCache(1, DType::I64), Error);
}

TEST(KvCache, LayersLiveWhereTheirKeysFirstArrive) {
  VirtualDevices devices;
  KvCache cache(2);
  Tensor k = iota(1, 1, 2, 0).to(Device::virt(0));
  cache.update(1, k, k);
  EXPECT_EQ(cache.device(1), Device::virt(0));
  EXPECT_EQ(cache.device(0), std::nullopt);
  try {
    cache.update(1, iota(1, 1, 2, 0), iota(1, 1, 2, 0));
    FAIL() << "accepted keys on another device";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("layer 1"), HasSubstr("virt:0"), HasSubstr("cpu")));
  }
}

TEST(KvCache, BadUpdatesAreErrors) {
  KvCache cache(2);
  EXPECT_THROW(cache.update(2, iota(1, 1, 2, 0), iota(1, 1, 2, 0)), Error);
  EXPECT_THROW(cache.update(-1, iota(1, 1, 2, 0), iota(1, 1, 2, 0)), Error);
  EXPECT_THROW(cache.update(0, iota(1, 1, 2, 0), iota(1, 1, 4, 0)), Error);
  EXPECT_THROW(cache.update(0, Tensor::zeros({2, 4}, DType::F32), Tensor::zeros({2, 4}, DType::F32)), Error);
  cache.update(0, iota(1, 1, 2, 0), iota(1, 1, 2, 0));
  EXPECT_THROW(cache.update(0, iota(1, 2, 2, 0), iota(1, 2, 2, 0)), Error);  // kv heads changed
  EXPECT_THROW(KvCache(-1), Error);
}

TEST(KvCache, TravelsAsPastKeyValues) {
  VirtualDevices devices;
  auto cache = std::make_shared<KvCache>(3);
  nn::Args args{Tensor::zeros({1}, DType::I64)};
  EXPECT_EQ(cache_from_args(args, "test"), nullptr);
  args.with("past_key_values", cache_value(cache));
  EXPECT_EQ(cache_from_args(args, "test"), cache);
  EXPECT_EQ(args.kwarg("past_key_values")->describe(), "object KvCache");
  // Device moves skip it (it is an Object, and AlignDevicesHook also lists it in skip_keys).
  nn::Args moved = nn::send_to_device(args, Device::virt(0), {"past_key_values"});
  EXPECT_EQ(cache_from_args(moved, "test"), cache);
  args.with("past_key_values", 3);
  EXPECT_THROW(cache_from_args(args, "test"), Error);
  args.with("past_key_values", nn::Value());
  EXPECT_EQ(cache_from_args(args, "test"), nullptr);
  EXPECT_EQ(kv_cache_bytes_per_token(4, 64, DType::F16), 2 * 4 * 64 * 2);
}

}  // namespace
}  // namespace ferry::models
