// CachingAllocator (see include/ferry/core/caching_allocator.h).
#include "ferry/core/caching_allocator.h"

#include <algorithm>

namespace ferry {

CachingAllocator::CachingAllocator(RawAlloc raw_alloc, RawFree raw_free)
    : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}

CachingAllocator::~CachingAllocator() { empty_cache(); }

std::size_t CachingAllocator::round_size(std::size_t n) noexcept {
  constexpr std::size_t kSmall = 512, kMiB = std::size_t(1) << 20, kLarge = 2 * kMiB, kHuge = 32 * kMiB;
  if (n == 0) n = 1;
  auto up = [n](std::size_t q) { return (n + q - 1) / q * q; };
  if (n <= kMiB) return up(kSmall);
  if (n <= 256 * kMiB) return up(kLarge);
  return up(kHuge);
}

void* CachingAllocator::allocate(std::size_t n) {
  const std::size_t size = round_size(n);
  std::lock_guard lock(mu_);
  auto it = free_.find(size);
  if (it != free_.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    stats_.cached -= size;
    stats_.in_use += size;
    ++stats_.hits;
    live_.emplace(p, size);
    return p;
  }
  void* p = raw_alloc_(size);
  if (!p && stats_.cached > 0) {
    release_cached_locked();
    p = raw_alloc_(size);
  }
  if (!p) return nullptr;
  ++stats_.raw_allocs;
  stats_.in_use += size;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.in_use + stats_.cached);
  live_.emplace(p, size);
  return p;
}

void CachingAllocator::deallocate(void* p) noexcept {
  if (!p) return;
  std::lock_guard lock(mu_);
  auto it = live_.find(p);
  if (it == live_.end()) return;
  const std::size_t size = it->second;
  live_.erase(it);
  stats_.in_use -= size;
  stats_.cached += size;
  free_[size].push_back(p);
}

void CachingAllocator::release_cached_locked() noexcept {
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) {
      raw_free_(p);
      ++stats_.raw_frees;
    }
    stats_.cached -= size * blocks.size();
  }
  free_.clear();
}

void CachingAllocator::empty_cache() noexcept {
  std::lock_guard lock(mu_);
  release_cached_locked();
}

CachingAllocator::Stats CachingAllocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace ferry
