// Prefetcher (see include/ferry/big_modeling/prefetch.h).
#include "ferry/big_modeling/prefetch.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"

namespace ferry {

std::string prefetch_name(int prefetch) { return prefetch == kPrefetchAuto ? "auto" : std::to_string(prefetch); }

int parse_prefetch(const std::string& text, const std::string& where) {
  if (text == "auto") return kPrefetchAuto;
  const bool digits = !text.empty() && text.size() <= 4 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits)
    throw Error("prefetch must be 'auto' or a number of modules to read ahead (0: synchronous reads), got '" + text +
                    "'",
                where, "e.g. --prefetch auto, --prefetch 2, --prefetch 0");
  return std::stoi(text);
}

Prefetcher::Prefetcher(int depth, PrefetchTunerOptions tuner)
    : depth_(depth), tuner_(depth == kPrefetchAuto ? std::make_unique<PrefetchTuner>(std::move(tuner)) : nullptr) {
  if (tuner_) depth_ = tuner_->depth();
  else if (depth < 1)
    throw Error("prefetch depth must be at least 1 (or kPrefetchAuto), got " + std::to_string(depth), "Prefetcher");
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Prefetcher> Prefetcher::create(int depth, const std::string& where) {
  if (depth < 0 && depth != kPrefetchAuto)
    throw Error("prefetch must be 0 (off), a number of modules or kPrefetchAuto, got " + std::to_string(depth), where);
  return depth == 0 ? nullptr : std::make_shared<Prefetcher>(depth);
}

std::size_t Prefetcher::index_of(const void* id) const {
  auto it = position_.find(id);
  return it == position_.end() ? modules_.size() : it->second;
}

void Prefetcher::reindex() {
  position_.clear();
  for (std::size_t i = 0; i < modules_.size(); ++i) position_[modules_[i].id] = i;
}

void Prefetcher::add(const void* id, std::shared_ptr<const io::WeightsMap> weights, std::vector<std::string> names) {
  std::lock_guard<std::mutex> lock(mu_);
  Module m{id, std::move(weights), std::move(names)};
  const std::size_t i = index_of(id);
  if (i < modules_.size()) {
    modules_[i] = std::move(m);
  } else {
    position_[id] = modules_.size();
    modules_.push_back(std::move(m));
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });  // waits for mu_, released below
}

void Prefetcher::remove(const void* id) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  const std::size_t i = index_of(id);
  if (i < modules_.size()) {
    modules_.erase(modules_.begin() + static_cast<std::ptrdiff_t>(i));
    reindex();
  }
  seen_.erase(std::remove(seen_.begin(), seen_.end(), id), seen_.end());
  jump_.erase(id);
  for (auto it = jump_.begin(); it != jump_.end();) it = it->second == id ? jump_.erase(it) : std::next(it);
  if (last_run_ == id) last_run_ = nullptr;
}

// The calls of the first forward become the order; modules it did not call keep their place after them.
void Prefetcher::confirm_order() {
  std::vector<Module> ordered;
  std::vector<bool> taken(modules_.size(), false);
  for (const void* id : seen_) {
    const std::size_t i = index_of(id);
    if (i < modules_.size() && !taken[i]) ordered.push_back(std::move(modules_[i])), taken[i] = true;
  }
  for (std::size_t i = 0; i < modules_.size(); ++i)
    if (!taken[i]) ordered.push_back(std::move(modules_[i]));
  modules_ = std::move(ordered);
  reindex();
  seen_.clear();
  confirmed_ = true;
}

void Prefetcher::announce(const void* id, bool guess) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::size_t p = index_of(id);
    if (p == modules_.size()) return;
    if (!guess) {  // what runs now is known: guesses not yet started were for it, and are stale
      for (const Job& j : queue_)
        if (j.guess)
          if (const std::size_t g = index_of(j.id); g < modules_.size()) modules_[g].queued = false;
      queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [](const Job& j) { return j.guess; }), queue_.end());
    }
    Module& m = modules_[p];
    if (!m.announced) m.queued = false;  // a read ahead by position before: that forward may not have run it
    m.announced = true;
    seen_.erase(std::remove(seen_.begin(), seen_.end(), id), seen_.end());  // not part of the fixed order
    if (m.queued || m.names.empty()) return;
    m.queued = true;
    if (guess) {  // last: whatever is known to run goes first
      queue_.push_back(Job{m.id, m.weights, m.names, true, true});
    } else {  // after the other announced jobs, before the look-ahead's: it runs sooner than the next fixed ones
      auto at = std::find_if(queue_.begin(), queue_.end(), [](const Job& j) { return !j.announced; });
      queue_.insert(at, Job{m.id, m.weights, m.names, true});
    }
  }
  wake_.notify_one();
}

void Prefetcher::will_run(const void* id) {
  bool queued_any = false;
  std::string decided;  // the tuner's new choice, logged outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A read still queued for a module that runs now would come after its forward has read the weights itself (a
    // prefetch thread that fell behind, e.g. on a loaded machine): drop it rather than read the bytes twice.
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [id](const Job& j) { return j.id == id; }), queue_.end());
    if (const std::size_t p = index_of(id); p < modules_.size() && modules_[p].announced) {
      modules_[p].queued = false;  // running now; announced again when it is picked again
      return;
    }
    if (!confirmed_) {
      if (std::find(seen_.begin(), seen_.end(), id) != seen_.end()) confirm_order();
      else seen_.push_back(id);
    }
    const std::size_t n = modules_.size();
    const std::size_t p = index_of(id);
    if (p == n) return;
    if (confirmed_ && last_run_ != nullptr) {
      const std::size_t last = index_of(last_run_);
      if (last < n && modules_[(last + 1) % n].id != id) jump_[last_run_] = id;
      else jump_.erase(last_run_);
      if (p <= last) decided = forward_started();  // back at (or before) the last one: a new forward
    }
    last_run_ = id;
    modules_[p].queued = false;  // running now: its next prefetch is for the next forward
    // The next modules: the order's, except where a module was last followed by another (jump_).
    auto successor = [&](std::size_t i) {
      const auto it = jump_.find(modules_[i].id);
      const std::size_t j = it == jump_.end() ? n : index_of(it->second);
      return j < n ? j : (i + 1) % n;
    };
    std::size_t j = p;
    for (std::size_t k = 0, steps = 0; k < static_cast<std::size_t>(std::max(depth_, 0)) && steps < n; ++steps) {
      j = successor(j);
      if (j == p) break;
      Module& m = modules_[j];
      if (m.announced) continue;  // data-dependent: not a step of the fixed order
      ++k;
      if (m.queued || m.names.empty()) continue;
      if (m.resident_runs >= kResidentAfter && ++m.skipped < kRecheckEvery) continue;
      m.skipped = 0;
      m.queued = true;
      queue_.push_back(Job{m.id, m.weights, m.names});
      queued_any = true;
    }
  }
  if (queued_any) wake_.notify_one();
  if (!decided.empty()) log_info("prefetch auto: {}", decided);
}

// The forward that ran since forward_start_ ended at last_end_ (idle time before this one is not counted). Returns
// the tuner's choice when it made one that changes the depth or is its first.
std::string Prefetcher::forward_started() {
  const Clock::time_point now = Clock::now();
  std::string decided;
  if (tuner_ && forward_start_ != Clock::time_point{} && last_end_ > forward_start_) {
    const int before = depth_;
    const double seconds = std::chrono::duration<double>(last_end_ - forward_start_).count();
    tuner_->observe(seconds);
    log_debug("prefetch auto: a forward at depth {} took {:.3f} s; next at depth {}", before, seconds, tuner_->depth());
    depth_ = tuner_->depth();
    if (tuner_->decided() && (tuner_->probes() == 1 || depth_ != before)) decided = tuner_->reason();
  }
  forward_start_ = now;
  return decided;
}

void Prefetcher::has_run(const void*) {
  if (!tuner_) return;
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  last_end_ = now;
}

int Prefetcher::depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return depth_;
}

PrefetchStatus Prefetcher::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  PrefetchStatus s;
  s.depth = depth_;
  s.self_tuning = tuner_ != nullptr;
  if (tuner_) {
    s.reason = tuner_->reason();
    s.probes = tuner_->probes();
  }
  return s;
}

void Prefetcher::run() {
  // A lower CPU priority (nice 10): the thread mostly waits on the disk and needs a core only to ask for reads, and
  // the forward's threads wait for each other, so a core taken from one of them stalls all. Not SCHED_IDLE: when the
  // forward keeps every core busy (prefill), the page-cache work of the reads would never run (measured: the
  // overlap's speed-up fell from 1.27x to 1.06x). Best effort: an error leaves the normal priority.
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    bool read = false;
    for (const auto& name : job.names) read |= job.weights->prefetch(name);  // noexcept: never fails a forward
    lock.lock();
    busy_ = false;
    prefetched_ += job.names.size();
    const std::size_t i = index_of(job.id);
    if (i < modules_.size()) modules_[i].resident_runs = read ? 0 : modules_[i].resident_runs + 1;
    if (queue_.empty()) idle_.notify_all();
  }
}

void Prefetcher::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return stop_ || (queue_.empty() && !busy_); });
}

std::vector<const void*> Prefetcher::order() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const void*> out;
  for (const auto& m : modules_) out.push_back(m.id);
  return out;
}

bool Prefetcher::order_confirmed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return confirmed_;
}

uint64_t Prefetcher::prefetched() const {
  std::lock_guard<std::mutex> lock(mu_);
  return prefetched_;
}

}  // namespace ferry
