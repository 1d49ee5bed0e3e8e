// CachedWeightsMap (io/weights_cache.h): the LRU cache of experts read from disk — hits, misses, eviction order, the
// byte budget, keys that pass through, and that a cached tensor is its own copy (the staging buffer it was read into
// is free again).
#include "ferry/io/weights_cache.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <fstream>
#include <thread>

#include "ferry/io/staged_reader.h"
#include "support/error_of.h"
#include "support/hf_folder.h"

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
  EXPECT_EQ(s.reused, 2u) << "each eviction's bytes took the next miss";
  EXPECT_EQ(cache.get("experts.1.w").data<float>()[15], 2.0f) << "copied into expert 2's old bytes";
}

TEST(CachedWeightsMap, AnEvictedTensorSomeoneStillHoldsKeepsItsBytes) {
  auto inner = four_experts();
  CachedWeightsMap cache(inner, 64, is_expert);
  const Tensor held = cache.get("experts.0.w");
  cache.get("experts.1.w");  // evicts 0, which `held` still uses
  EXPECT_EQ(cache.stats().reused, 0u);
  EXPECT_EQ(held.data<float>()[0], 1.0f);
  cache.get("experts.2.w");  // evicts 1, which nobody holds: its bytes are reused
  EXPECT_EQ(cache.stats().reused, 1u);
  EXPECT_EQ(held.data<float>()[0], 1.0f);
  EXPECT_EQ(cache.get("experts.2.w").data<float>()[7], 3.0f);
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

// Three layers of four 64-byte experts; each token routes two per layer, in index order: experts 0 and 1 at even
// tokens, 1 and 2 at odd ones (expert 1 repeats from token to token).
std::shared_ptr<CountingMap> three_layers() {
  StateDict sd;
  for (int l = 0; l < 3; ++l)
    for (int e = 0; e < 4; ++e)
      sd.insert("layers." + std::to_string(l) + ".experts." + std::to_string(e) + ".w",
                Tensor::full({16}, 10 * l + e, DType::F32));
  return std::make_shared<CountingMap>(std::move(sd));
}

// As a sparse block reads them: a layer announces its routed experts (prefetch), then runs them in order.
uint64_t hits_over_ten_tokens(CachedWeightsMap& cache) {
  auto key = [](int l, int e) { return "layers." + std::to_string(l) + ".experts." + std::to_string(e) + ".w"; };
  for (int token = 0; token < 10; ++token)
    for (int l = 0; l < 3; ++l) {
      const auto routed = token % 2 == 0 ? std::array{0, 1} : std::array{1, 2};
      for (int e : routed) cache.prefetch(key(l, e));
      for (int e : routed) EXPECT_EQ(cache.get(key(l, e)).data<float>()[0], static_cast<float>(10 * l + e));
    }
  return cache.stats().hits;
}

std::string layer_of(const std::string& key) { return key.substr(0, key.find(".experts.")); }

TEST(CachedWeightsMap, GroupedByLayerAPartOfTheWorkingSetStillHitsWherePlainLruNeverDoes) {
  const auto in_experts = [](const std::string& key) { return key.find(".experts.") != std::string::npos; };
  // Room for 3 experts; a token reads 6. Plain LRU: each expert comes back after 5 others — always evicted by then.
  CachedWeightsMap plain(three_layers(), 3 * 64, in_experts);
  EXPECT_EQ(hits_over_ten_tokens(plain), 0u);
  // In groups, each layer keeps its last expert: expert 1 after even tokens, hit at every odd one.
  CachedWeightsMap grouped(three_layers(), 3 * 64, in_experts, layer_of);
  EXPECT_EQ(hits_over_ten_tokens(grouped), 3u * 5u);
  EXPECT_LE(grouped.stats().bytes, 3u * 64u);
  // Room for everything a token reads: both keep what repeats (expert 1 of every layer after the first token).
  CachedWeightsMap plain_big(three_layers(), 6 * 64, in_experts),
      grouped_big(three_layers(), 6 * 64, in_experts, layer_of);
  EXPECT_EQ(hits_over_ten_tokens(plain_big), 3u * 9u);
  EXPECT_EQ(hits_over_ten_tokens(grouped_big), 3u * 9u);
}

TEST(CachedWeightsMap, AGroupBorrowsWhatTheOthersLeaveAndGivesItBackWhenTheyNeedIt) {
  const auto in_experts = [](const std::string& key) { return key.find(".experts.") != std::string::npos; };
  auto inner = three_layers();
  CachedWeightsMap cache(inner, 4 * 64, in_experts, layer_of);
  for (int e = 0; e < 4; ++e) cache.get("layers.0.experts." + std::to_string(e) + ".w");  // layer 0 alone: all 4
  EXPECT_EQ(cache.stats().evictions, 0u);
  cache.get("layers.1.experts.0.w");  // layer 1 comes: layer 0 (the largest) gives up its least recent, expert 0
  cache.get("layers.1.experts.1.w");  // and then expert 1
  EXPECT_EQ(cache.stats().evictions, 2u);
  const int before = inner->gets;
  cache.get("layers.0.experts.2.w");
  cache.get("layers.0.experts.3.w");
  cache.get("layers.1.experts.0.w");
  EXPECT_EQ(inner->gets, before) << "each layer holds its two most recent";
  cache.get("layers.0.experts.0.w");
  EXPECT_EQ(inner->gets, before + 1);
}

TEST(CachedWeightsMap, APrefetchedKeyIsTheMostRecentlyUsed) {
  auto inner = four_experts();
  CachedWeightsMap cache(inner, 2 * 64, is_expert);
  cache.get("experts.0.w");
  cache.get("experts.1.w");                     // 0 is the least recent
  EXPECT_FALSE(cache.prefetch("experts.0.w"));  // about to run: now the most recent
  cache.get("experts.2.w");                     // evicts 1, not 0
  const int before = inner->gets;
  cache.get("experts.0.w");
  EXPECT_EQ(inner->gets, before);
  cache.get("experts.1.w");
  EXPECT_EQ(inner->gets, before + 1);
}

// Direct reads: the cache keeps the staging buffer a miss was read into (no copy), and it leaves the reader's pool.
TEST(CachedWeightsMap, DirectReadsAreKeptWithoutACopy) {
  test::TempDir dir;
  // Three 1 MiB experts at 1 MiB boundaries of one data file (a GGUF's stacked experts are read this way), and a
  // 1000-byte tensor, too small for its 4096-byte read to be kept.
  std::string bytes(3u << 20, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i >> 20) * 7 + i % 13);
  bytes += std::string(1000, 'x');
  const auto file = dir.path() / "experts.bin";
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  OffloadIndex index;
  for (int e = 0; e < 3; ++e)
    index["experts." + std::to_string(e) + ".w"] =
        OffloadEntry{DType::U8, Shape{1 << 20}, "", "", file.string(), static_cast<uint64_t>(e) << 20};
  index["experts.small.w"] = OffloadEntry{DType::U8, Shape{1000}, "", "", file.string(), 3u << 20};
  auto loader = std::make_shared<OffloadedWeightsLoader>(StateDict{}, std::nullopt, index);
  auto reader = std::make_shared<StagedReader>(StagedReaderOptions{.pool_bytes = 2u << 20});
  loader->set_staged_reader(reader);
  CachedWeightsMap cache(loader, 2u << 20, is_expert);
  auto expect_bytes = [&](const Tensor& t, std::size_t at) {
    EXPECT_EQ(std::string(static_cast<const char*>(t.raw_data()), t.nbytes()), bytes.substr(at, t.nbytes()));
  };
  const Tensor e0 = cache.get("experts.0.w");
  expect_bytes(e0, 0);
  expect_bytes(cache.get("experts.1.w"), 1u << 20);
  expect_bytes(cache.get("experts.2.w"), 2u << 20);  // evicts expert 0 (still held by e0: its bytes stay)
  expect_bytes(e0, 0);
  expect_bytes(cache.get("experts.1.w"), 1u << 20);  // a hit
  expect_bytes(cache.get("experts.small.w"), 3u << 20);
  const WeightsCacheStats s = cache.stats();
  EXPECT_EQ(s.kept, 3u) << "the three 1 MiB reads are kept as read";
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_LE(s.bytes, 2u << 20);
  EXPECT_EQ(reader->stats().kept, 4u) << "the small one was handed over too, then copied: its buffer is 4 KiB";
  EXPECT_EQ(reader->stats().overflow_peak, 0u) << "kept buffers leave the pool: every read found room";
}

TEST(CachedWeightsMap, NeedsAnInnerMap) {
  EXPECT_NE(test::error_of([] { CachedWeightsMap(nullptr, 0, is_expert); }).find("weights map"), std::string::npos);
}

}  // namespace
}  // namespace ferry::io
