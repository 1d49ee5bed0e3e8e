// CachedWeightsMap (include/ferry/io/weights_cache.h).
#include "ferry/io/weights_cache.h"

#include "ferry/core/error.h"

namespace ferry::io {

CachedWeightsMap::CachedWeightsMap(std::shared_ptr<const WeightsMap> inner, std::size_t capacity_bytes,
                                   std::function<bool(const std::string&)> cacheable)
    : inner_(std::move(inner)), capacity_(capacity_bytes), cacheable_(std::move(cacheable)) {
  if (!inner_) throw Error("CachedWeightsMap needs a weights map", "CachedWeightsMap");
  stats_.capacity = capacity_;
}

Tensor CachedWeightsMap::get(const std::string& key) const {
  if (!cacheable_ || !cacheable_(key)) return inner_->get(key);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      ++stats_.hits;
      return it->second.tensor;
    }
  }
  Tensor read = inner_->get(key);  // outside the lock: a miss may wait for the disk
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.misses;
  stats_.bytes_missed += read.nbytes();
  if (read.nbytes() > capacity_ || entries_.count(key)) return read;  // too big to keep / kept by another thread
  Tensor own = read.clone();  // the staging buffer (or mapped view) is released with `read`
  while (stats_.bytes + own.nbytes() > capacity_ && !lru_.empty()) {
    auto victim = entries_.find(lru_.back());
    stats_.bytes -= victim->second.tensor.nbytes();
    entries_.erase(victim);
    lru_.pop_back();
    ++stats_.evictions;
  }
  lru_.push_front(key);
  entries_.emplace(key, Entry{own, lru_.begin()});
  stats_.bytes += own.nbytes();
  return own;
}

bool CachedWeightsMap::prefetch(const std::string& key) const noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.count(key)) return false;
  }
  return inner_->prefetch(key);
}

WeightsCacheStats CachedWeightsMap::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace ferry::io
