// CachedWeightsMap (io/weights_cache.h): the LRU cache of experts read from disk — hits, misses, eviction order, the
// byte budget, keys that pass through, and that a cached tensor is its own copy (the staging buffer it was read into
// is free again).
#include "ferry/io/weights_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "support/error_of.h"

namespace ferry::io {
namespace {

// A weights map over a state dict that counts get() per key.
class CountingMap : public WeightsMap {
 public:
  explicit CountingMap(StateDict sd) : inner_(std::move(sd)) {}
  Tensor get(const std::string& key) const override {
    ++gets;
    return inner_.get(key);
  }
  bool contains(const std::string& key) const override { return inner_.contains(key); }
  std::vector<std::string> keys() const override { return inner_.keys(); }
  std::size_t size() const override { return inner_.size(); }
  bool prefetch(const std::string& key) const noexcept override {
    ++prefetches;
    return inner_.contains(key);
  }
  mutable std::atomic<int> gets{0}, prefetches{0};

 private:
  OffloadedWeightsLoader inner_;
};

// Four 64-byte experts and one dense tensor.
std::shared_ptr<CountingMap> four_experts() {
  StateDict sd;
  for (int e = 0; e < 4; ++e) sd.insert("experts." + std::to_string(e) + ".w", Tensor::full({16}, e + 1, DType::F32));
  sd.insert("norm.weight", Tensor::full({16}, 9.0, DType::F32));
  return std::make_shared<CountingMap>(std::move(sd));
}

bool is_expert(const std::string& key) { return key.rfind("experts.", 0) == 0; }

TEST(CachedWeightsMap, HitsServeFromRamAndTheLeastRecentlyUsedIsEvicted) {
  auto inner = four_experts();
  CachedWeightsMap cache(inner, 2 * 64, is_expert);  // two experts
  EXPECT_EQ(cache.get("experts.0.w").data<float>()[0], 1.0f);
  EXPECT_EQ(cache.get("experts.1.w").data<float>()[0], 2.0f);
  EXPECT_EQ(cache.get("experts.0.w").data<float>()[3], 1.0f);  // hit; 1 is now the least recent
  EXPECT_EQ(inner->gets, 2);
  cache.get("experts.2.w");  // evicts 1
  EXPECT_EQ(inner->gets, 3);
  cache.get("experts.0.w");  // still held
  EXPECT_EQ(inner->gets, 3);
  cache.get("experts.1.w");  // was evicted: read again, evicts 2
  EXPECT_EQ(inner->gets, 4);
  const WeightsCacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.bytes, 128u);
  EXPECT_EQ(s.capacity, 128u);
  EXPECT_EQ(s.bytes_missed, 4u * 64u);
}

TEST(CachedWeightsMap, OtherKeysPassThroughUncountedAndUncached) {
  auto inner = four_experts();
  CachedWeightsMap cache(inner, 1 << 20, is_expert);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cache.get("norm.weight").data<float>()[0], 9.0f);
  EXPECT_EQ(inner->gets, 3);
  EXPECT_EQ(cache.stats().hits + cache.stats().misses, 0u);
  EXPECT_TRUE(cache.contains("norm.weight"));
  EXPECT_EQ(cache.keys(), inner->keys());
  EXPECT_EQ(cache.size(), 5u);
  EXPECT_NE(test::error_of([&] { cache.get("experts.9.w"); }).find("experts.9.w"), std::string::npos)
      << "an unknown key is the inner map's error, naming it";
}

TEST(CachedWeightsMap, ZeroCapacityReadsEveryTimeAndCountsTheMisses) {
  auto inner = four_experts();
  CachedWeightsMap cache(inner, 0, is_expert);
  for (int i = 0; i < 3; ++i) cache.get("experts.3.w");
  EXPECT_EQ(inner->gets, 3);
  EXPECT_EQ(cache.stats().misses, 3u);
  EXPECT_EQ(cache.stats().bytes, 0u);
  EXPECT_EQ(cache.stats().evictions, 0u);
}

TEST(CachedWeightsMap, ACachedTensorIsItsOwnCopyAndPrefetchSkipsWhatIsHeld) {
  auto inner = four_experts();
  CachedWeightsMap cache(inner, 1 << 20, is_expert);
  const Tensor first = cache.get("experts.2.w");
  EXPECT_NE(first.raw_data(), inner->get("experts.2.w").raw_data()) << "copied out of the read buffer";
  EXPECT_EQ(cache.get("experts.2.w").raw_data(), first.raw_data());
  EXPECT_FALSE(cache.prefetch("experts.2.w"));
  EXPECT_EQ(inner->prefetches, 0);
  EXPECT_TRUE(cache.prefetch("experts.1.w"));
  EXPECT_EQ(inner->prefetches, 1);
}

TEST(CachedWeightsMap, ConcurrentReadersSeeTheRightBytes) {
  auto inner = four_experts();
  CachedWeightsMap cache(inner, 2 * 64, is_expert);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        const int e = (i * 7 + t) % 4;
        if (cache.get("experts." + std::to_string(e) + ".w").data<float>()[15] != static_cast<float>(e + 1)) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, 0);
  const WeightsCacheStats s = cache.stats();
  EXPECT_EQ(s.hits + s.misses, 2000u);
  EXPECT_LE(s.bytes, 128u);
}

TEST(CachedWeightsMap, NeedsAnInnerMap) {
  EXPECT_NE(test::error_of([] { CachedWeightsMap(nullptr, 0, is_expert); }).find("weights map"), std::string::npos);
}

}  // namespace
}  // namespace ferry::io
