// CachedWeightsMap: a bounded LRU cache in RAM in front of a weights map, for the tensors a model reads only some of
// the time — the experts of a mixture of experts placed on disk, read when a token routes to them. A hit costs
// nothing; a miss reads through the inner map (a direct read into the staging pool, or a page-cache view), copies the
// bytes into memory of the cache's own — or, for a direct read, keeps the staging buffer itself, which leaves the
// reader's pool (WeightsMap::get_to_keep: no copy) — and evicts the least recently used tensors beyond the budget.
//
// LRU rather than frequency: published measurements on Qwen3-30B-A3B (about 45 % of a layer's expert choices repeat at
// the next token, 80 % within 8 tokens) found plain LRU ahead of frequency pinning at every cache size.
//
// LRU in groups (one per layer): a plain LRU cache smaller than what one token reads over all layers never hits —
// the layers take turns, and each evicts the experts the layers before it read before the next token comes back to
// them. With a `group` function, a full cache evicts from the group that holds the most bytes (ties: the group of the
// tensor coming in), least recently used first. Every group then keeps about capacity / groups, and below one
// token's working set a layer still holds its own most recent experts, which hit when routing repeats; above it, where
// groups are read alike, the order is plain LRU's. A group may borrow what the others leave unused.
//
//   auto cache = std::make_shared<CachedWeightsMap>(disk_map, 2LL << 30,
//       [](const std::string& key) { return key.find(".experts.") != std::string::npos; },
//       [](const std::string& key) { return key.substr(0, key.find(".experts.")); });  // the layer
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "ferry/io/offload.h"

namespace ferry::io {

struct WeightsCacheStats {
  std::uint64_t hits = 0, misses = 0;  ///< get() calls on cacheable keys
  std::uint64_t evictions = 0;
  std::uint64_t reused = 0;        ///< misses copied into the bytes of a tensor just evicted (no fresh allocation)
  std::uint64_t kept = 0;          ///< misses kept without a copy (the inner map handed over the buffer it read into)
  std::uint64_t bytes_missed = 0;  ///< bytes read through the inner map for misses
  std::size_t bytes = 0;           ///< held now
  std::size_t capacity = 0;
};

class CachedWeightsMap : public WeightsMap {
 public:
  /// `cacheable(key)`: whether a key is cached (others pass straight through). `capacity_bytes` 0: nothing is cached
  /// (every cacheable get is a miss, counted). `group(key)` (optional): the group a cacheable key belongs to, whose
  /// share of the capacity it competes for (above); none: one group, plain LRU.
  CachedWeightsMap(std::shared_ptr<const WeightsMap> inner, std::size_t capacity_bytes,
                   std::function<bool(const std::string&)> cacheable,
                   std::function<std::string(const std::string&)> group = {});

  Tensor get(const std::string& key) const override;
  bool contains(const std::string& key) const override { return inner_->contains(key); }
  std::vector<std::string> keys() const override { return inner_->keys(); }
  std::size_t size() const override { return inner_->size(); }
  /// A cached key needs no read (false) and becomes the most recently used — it is about to run, so the reads before
  /// it do not evict it; others are passed on.
  bool prefetch(const std::string& key) const noexcept override;
  /// From the cached tensor when held (not counted as a hit), else from the inner map; nothing is cached.
  Tensor get_rows(const std::string& key, std::span<const int64_t> rows) const override;

  WeightsCacheStats stats() const;
  const std::shared_ptr<const WeightsMap>& inner() const noexcept { return inner_; }

 private:
  struct Group {
    std::list<std::string> lru;  // front: most recent
    std::size_t bytes = 0;
  };
  struct Entry {
    Tensor tensor;
    std::size_t bytes;  // of memory held: a kept staging buffer may be a little larger than its tensor
    Group* group;
    std::list<std::string>::iterator lru;  // position in group->lru
  };
  void touch(Entry& e) const { e.group->lru.splice(e.group->lru.begin(), e.group->lru, e.lru); }
  // Evicts one tensor to make room for one of `incoming` and returns it; undefined when nothing is held.
  Tensor evict_one(const Group& incoming) const;

  std::shared_ptr<const WeightsMap> inner_;
  std::size_t capacity_;
  std::function<bool(const std::string&)> cacheable_;
  std::function<std::string(const std::string&)> group_of_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, Group> groups_;  // node-based: Entry::group stays valid
  mutable std::unordered_map<std::string, Entry> entries_;
  mutable WeightsCacheStats stats_;
};

}  // namespace ferry::io
