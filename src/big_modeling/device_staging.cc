// DeviceStagedWeights (see include/ferry/big_modeling/device_staging.h).
#include "ferry/big_modeling/device_staging.h"

#include "ferry/core/logging.h"

namespace ferry {

DeviceStagedWeights::DeviceStagedWeights(std::shared_ptr<const io::WeightsMap> inner, Device device)
    : inner_(std::move(inner)), device_(device) {}

DeviceStagedWeights::~DeviceStagedWeights() {
  // Copies still in flight write into blocks that return to the device allocator: wait for them first.
  std::lock_guard lock(mu_);
  for (auto& [name, s] : ready_) {
    try {
      finish(s);
    } catch (const std::exception& e) {
      log_warning("DeviceStagedWeights: a prefetched copy of {} failed: {}", name, e.what());
    }
  }
}

void DeviceStagedWeights::finish(Staged& s) {
  if (s.event) s.event->synchronize();
  s.event.reset();
  s.host = Tensor();
}

bool DeviceStagedWeights::prefetch(const std::string& key) const noexcept {
  uint64_t gets_before = 0;
  {
    std::lock_guard lock(mu_);
    // A copy waiting to be used, or one being made, is still good: weights maps are read-only.
    if (ready_.count(key) || in_flight_.count(key)) return true;
    gets_before = gets_[key];
    in_flight_.insert(key);
  }
  Staged s;
  bool ok = false;
  try {
    if (inner_->contains(key)) {
      inner_->prefetch(key);  // disk reads ahead first (page cache or staging pool)
      Tensor host = inner_->get(key);
      if (host.device() == device_) {
        s.device = host;  // already there (a weight the inner map keeps on the device)
      } else {
        if (!host.device().is_host_addressable()) host = host.to(Device::cpu());
        s.device = Tensor::empty(host.shape(), host.dtype(), device_);
        s.event = copy_bytes_async(s.device.raw_data(), device_, host.raw_data(), host.device(), host.nbytes());
        s.host = std::move(host);
      }
      ok = true;
    }
  } catch (const std::exception& e) {
    std::lock_guard lock(mu_);
    if (++stats_.failed == 1)
      log_warning("prefetching {} to {} failed ({}); it is copied when needed", key, device_.str(), e.what());
  }
  {
    std::lock_guard lock(mu_);
    in_flight_.erase(key);
    // Stored unless the module already ran without it (then the copy came too late and is dropped).
    if (ok && gets_[key] == gets_before) ready_[key] = std::move(s);
  }
  arrived_.notify_all();
  if (ok && s.device.defined()) {
    try {
      finish(s);  // dropped: wait for the copy before its block returns to the allocator
    } catch (const std::exception&) {
    }
  }
  return ok;
}

Tensor DeviceStagedWeights::get_rows(const std::string& key, std::span<const int64_t> rows) const {
  return inner_->get_rows(key, rows).to(device_);
}

Tensor DeviceStagedWeights::get(const std::string& key) const {
  Staged s;
  bool found = false;
  {
    std::unique_lock lock(mu_);
    // A copy of this weight is being made right now: wait for it rather than move the same bytes twice.
    arrived_.wait(lock, [&] { return !in_flight_.count(key); });
    ++gets_[key];
    auto it = ready_.find(key);
    if (it != ready_.end()) {
      s = std::move(it->second);
      ready_.erase(it);
      found = true;
      ++stats_.staged;
    } else {
      ++stats_.synchronous;
    }
  }
  if (!found) return inner_->get(key).to(device_);
  if (s.event) s.event->order_before_compute();
  finish(s);  // the host bytes (maybe a staging buffer) are released only once the copy has read them
  return s.device;
}

DeviceStagedWeights::Stats DeviceStagedWeights::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::shared_ptr<const io::WeightsMap> stage_on_execution_device(std::shared_ptr<const io::WeightsMap> weights,
                                                                Device execution_device, bool prefetching) {
  if (!weights || !prefetching || !execution_device.is_accelerator()) return weights;
  return std::make_shared<DeviceStagedWeights>(std::move(weights), execution_device);
}

}  // namespace ferry
