// CachedWeightsMap (include/ferry/io/weights_cache.h).
#include "ferry/io/weights_cache.h"

#include "ferry/core/error.h"

namespace ferry::io {

CachedWeightsMap::CachedWeightsMap(std::shared_ptr<const WeightsMap> inner, std::size_t capacity_bytes,
                                   std::function<bool(const std::string&)> cacheable,
                                   std::function<std::string(const std::string&)> group)
    : inner_(std::move(inner)),
      capacity_(capacity_bytes),
      cacheable_(std::move(cacheable)),
      group_of_(std::move(group)) {
  if (!inner_) throw Error("CachedWeightsMap needs a weights map", "CachedWeightsMap");
  stats_.capacity = capacity_;
}

Tensor CachedWeightsMap::get_rows(const std::string& key, std::span<const int64_t> rows) const {
  if (cacheable_ && cacheable_(key)) {
    Tensor held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = entries_.find(key);
      if (it != entries_.end()) held = it->second.tensor;
    }
    if (held.defined()) return gather_rows(held, rows, key);
  }
  return inner_->get_rows(key, rows);
}

Tensor CachedWeightsMap::get(const std::string& key) const {
  if (!cacheable_ || !cacheable_(key)) return inner_->get(key);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      touch(it->second);
      ++stats_.hits;
      return it->second.tensor;
    }
  }
  // Outside the lock: a miss may wait for the disk. A staged read hands over its buffer (owned): kept as it is.
  OwnedTensor read = inner_->get_to_keep(key);
  // A buffer much larger than its tensor (a small tensor in a block-aligned read, or a larger buffer the pool reused)
  // is not worth its RAM: copied instead.
  const std::size_t need = read.tensor.nbytes();
  if (read.owned && read.tensor.storage()->nbytes() > need + need / 16) read.owned = false;
  const std::size_t held = read.owned ? read.tensor.storage()->nbytes() : need;
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.misses;
  stats_.bytes_missed += read.tensor.nbytes();
  if (held > capacity_ || entries_.count(key)) return read.tensor;  // too big to keep / kept by another thread
  // Room first. Not owned (a view of a mapping, or of memory someone else holds): copied, into the bytes of an evicted
  // tensor of the same size that nobody else holds when there is one, so that a miss writes memory already touched
  // instead of faulting in fresh pages (experts of a layer are all one size).
  Group& group = groups_[group_of_ ? group_of_(key) : std::string()];
  Tensor reusable;
  while (stats_.bytes + held > capacity_) {
    Tensor victim = evict_one(group);
    if (!victim.defined()) break;
    if (!read.owned && !reusable.defined() && victim.storage().use_count() == 1 && victim.byte_offset() == 0 &&
        victim.storage()->nbytes() == held && victim.device() == read.tensor.device())
      reusable = std::move(victim);
  }
  Tensor own;
  if (read.owned) {
    own = read.tensor;
    ++stats_.kept;
  } else if (reusable.defined()) {
    own = Tensor::from_storage(reusable.storage(), 0, read.tensor.shape(), read.tensor.dtype());
    own.copy_from(read.tensor);
    ++stats_.reused;
  } else {
    own = read.tensor.clone();
  }
  group.lru.push_front(key);
  group.bytes += held;
  entries_.emplace(key, Entry{own, held, &group, group.lru.begin()});
  stats_.bytes += held;
  return own;
}

Tensor CachedWeightsMap::evict_one(const Group& incoming) const {
  // The group holding the most bytes gives one up, the incoming one on a tie: at a full cache every group keeps about
  // its share, and a group at its share replaces its own least recently used.
  Group* from = nullptr;
  for (auto& [name, g] : groups_)
    if (!g.lru.empty() && (from == nullptr || g.bytes > from->bytes || (g.bytes == from->bytes && &g == &incoming)))
      from = &g;
  if (from == nullptr) return {};
  auto victim = entries_.find(from->lru.back());
  Tensor t = std::move(victim->second.tensor);
  stats_.bytes -= victim->second.bytes;
  from->bytes -= victim->second.bytes;
  from->lru.pop_back();
  entries_.erase(victim);
  ++stats_.evictions;
  return t;
}

bool CachedWeightsMap::prefetch(const std::string& key) const noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      touch(it->second);
      return false;
    }
  }
  return inner_->prefetch(key);
}

WeightsCacheStats CachedWeightsMap::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace ferry::io
