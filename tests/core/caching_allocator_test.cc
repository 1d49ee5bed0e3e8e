// CachingAllocator over a counting host allocator: size classes, reuse, no growth over repeated forwards, and the
// out-of-memory retry after emptying the cache.
#include "ferry/core/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <vector>
#include <set>

namespace ferry {
namespace {

struct CountingRaw {
  std::size_t live = 0, limit = SIZE_MAX;
  int allocs = 0, frees = 0;
  std::set<void*> blocks;
  std::map<void*, std::size_t> sizes;
  CachingAllocator make() {
    return CachingAllocator(
        [this](std::size_t n) -> void* {
          if (live + n > limit) return nullptr;
          void* p = std::malloc(n);
          live += n;
          ++allocs;
          sizes[p] = n;
          return p;
        },
        [this](void* p) {
          live -= sizes.at(p);
          sizes.erase(p);
          ++frees;
          std::free(p);
        });
  }
};

TEST(CachingAllocator, SizeClasses) {
  EXPECT_EQ(CachingAllocator::round_size(0), 512u);
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(1u << 20), 1u << 20);
  EXPECT_EQ(CachingAllocator::round_size((1u << 20) + 1), 2u << 20);
  EXPECT_EQ(CachingAllocator::round_size((5u << 20) + 7), 6u << 20);
  EXPECT_EQ(CachingAllocator::round_size((256u << 20) + 1), 288u << 20);
}

TEST(CachingAllocator, ReusesFreedBlocksOfTheSameClass) {
  CountingRaw raw;
  auto a = raw.make();
  void* p = a.allocate(1000);
  a.deallocate(p);
  void* q = a.allocate(900);  // same 1024-byte class
  EXPECT_EQ(p, q);
  EXPECT_EQ(raw.allocs, 1);
  EXPECT_EQ(a.stats().hits, 1u);
  void* r = a.allocate(5000);  // another class: a new block
  EXPECT_NE(r, q);
  EXPECT_EQ(raw.allocs, 2);
  a.deallocate(q);
  a.deallocate(r);
  EXPECT_EQ(a.stats().in_use, 0u);
  EXPECT_EQ(a.stats().cached, 1024u + 5120u);
  a.empty_cache();
  EXPECT_EQ(a.stats().cached, 0u);
  EXPECT_EQ(raw.live, 0u);
  a.deallocate(nullptr);              // ignored
  a.deallocate(reinterpret_cast<void*>(0x1234));  // unknown: ignored
}

TEST(CachingAllocator, NoGrowthOverRepeatedForwards) {
  CountingRaw raw;
  auto a = raw.make();
  const std::size_t shapes[] = {4096 * 4, 11008 * 4, 4096 * 4, 32000 * 4, 64, 4096 * 4 * 7};
  auto forward = [&] {
    std::vector<void*> live;
    for (int layer = 0; layer < 4; ++layer) {
      for (std::size_t n : shapes) live.push_back(a.allocate(n));
      for (std::size_t i = 1; i < live.size(); i += 2) {  // free half within the layer, like temporaries
        a.deallocate(live[i]);
        live[i] = nullptr;
      }
    }
    for (void* p : live) a.deallocate(p);
  };
  forward();
  const int after_first = raw.allocs;
  const std::size_t reserved = raw.live;
  for (int i = 0; i < 100; ++i) forward();
  EXPECT_EQ(raw.allocs, after_first);
  EXPECT_EQ(raw.live, reserved);
  EXPECT_EQ(a.stats().in_use, 0u);
}

TEST(CachingAllocator, OutOfMemoryEmptiesTheCacheAndRetriesOnce) {
  CountingRaw raw;
  raw.limit = 8u << 20;
  auto a = raw.make();
  void* p = a.allocate(6u << 20);
  ASSERT_NE(p, nullptr);
  a.deallocate(p);  // cached: 6 MiB held by the pool
  void* q = a.allocate(4u << 20);  // needs the cached block released first
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(raw.frees, 1);
  EXPECT_EQ(a.allocate(5u << 20), nullptr);  // 4 + 6 > 8 even with an empty cache
  a.deallocate(q);
}

}  // namespace
}  // namespace ferry
