// Fixed-size thread pool with one job at a time (see include/ferry/core/thread_pool.h).
//
// Kernels call parallel_for many times per token (every GEMV), so dispatch latency matters more than
// generality: workers spin briefly on a generation counter before sleeping on a condition variable, and chunks
// are claimed from an atomic counter so uneven chunks balance themselves.
#include "ferry/core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/error.h"

namespace ferry {
namespace {

thread_local bool t_in_pool_task = false;

class ThreadPool {
 public:
  explicit ThreadPool(int n) { start(n); }
  ~ThreadPool() { stop(); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int n) {
    stop();
    start(n);
  }

  void run(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    const int64_t n = end - begin;
    const int64_t max_chunks = static_cast<int64_t>(size()) * 4;
    const int64_t chunks = std::clamp<int64_t>((n + grain - 1) / grain, 1, max_chunks);
    if (chunks == 1 || workers_.empty() || t_in_pool_task) {
      fn(begin, end);
      return;
    }
    std::lock_guard run_lock(run_mu_);  // one job at a time from different caller threads
    auto job = std::make_shared<Job>();
    job->begin = begin;
    job->end = end;
    job->chunks = chunks;
    job->fn = &fn;
    {
      std::lock_guard lock(mu_);
      job_ = job;
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    work(*job);
    // fn is only called for a claimed chunk < chunks, and every such chunk is counted done after fn returns,
    // so once all are done no thread can still be inside fn, even one holding a stale copy of this job.
    while (job->done.load(std::memory_order_acquire) < chunks) std::this_thread::yield();
    if (job->error) std::rethrow_exception(job->error);
  }

 private:
  struct Job {
    int64_t begin = 0, end = 0, chunks = 0;
    const std::function<void(int64_t, int64_t)>* fn = nullptr;
    std::atomic<int64_t> next{0}, done{0};
    std::mutex error_mu;
    std::exception_ptr error;
  };

  void start(int n) {
    quit_ = false;
    // The generation is read here, not in the new thread: a worker that starts late must still see a stop()
    // (or a job) that happened before it ran, or it would wait for a change that never comes.
    const uint64_t seen = generation_.load();
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, seen] { loop(seen); });
  }

  void stop() {
    {
      std::lock_guard lock(mu_);
      quit_ = true;
      generation_.fetch_add(1);
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  static void work(Job& job) {
    const int64_t n = job.end - job.begin;
    for (;;) {
      int64_t c = job.next.fetch_add(1);
      if (c >= job.chunks) break;
      int64_t b = job.begin + n * c / job.chunks, e = job.begin + n * (c + 1) / job.chunks;
      t_in_pool_task = true;
      try {
        (*job.fn)(b, e);
      } catch (...) {
        std::lock_guard lock(job.error_mu);
        if (!job.error) job.error = std::current_exception();
      }
      t_in_pool_task = false;
      job.done.fetch_add(1, std::memory_order_acq_rel);
    }
  }

  void loop(uint64_t seen) {
    for (;;) {
      // Spin a little: back-to-back kernels (a decode step) reuse awake workers.
      for (int spin = 0; spin < 20000 && generation_.load(std::memory_order_acquire) == seen; ++spin)
        if (spin > 64) std::this_thread::yield();
      std::shared_ptr<Job> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return quit_ || generation_.load() != seen; });
        seen = generation_.load();
        if (quit_) return;
        job = job_;
      }
      if (job) work(*job);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_, run_mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::shared_ptr<Job> job_;
  bool quit_ = false;
};

int default_threads() {
  if (const char* env = std::getenv("FERRY_NUM_THREADS")) {
    try {
      int n = std::stoi(env);
      if (n >= 1) return n;
    } catch (const std::exception&) {
    }
    throw Error(std::string("FERRY_NUM_THREADS='") + env + "' is not a positive integer");
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& pool() {
  static ThreadPool* p = new ThreadPool(default_threads());  // leaked: workers must outlive static destructors
  return *p;
}

}  // namespace

int num_threads() { return pool().size(); }

void set_num_threads(int n) {
  if (n < 1) throw Error("thread count must be at least 1, got " + std::to_string(n));
  pool().resize(n);
}

void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  pool().run(begin, end, std::max<int64_t>(grain, 1), fn);
}

}  // namespace ferry
