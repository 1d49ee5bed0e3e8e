// StagedReader (see include/ferry/io/staged_reader.h).
//
// One reader thread owns the io_uring. A read covers the tensor's range widened to 4096-byte blocks (O_DIRECT's
// alignment for offset, length and buffer address) and is cut into chunk_bytes pieces, queue_depth of them in flight
// at once; the tensor then views its staging buffer at the range's offset within the first block, so no bounce copy
// is needed. Buffers are kept in a free list and reused by size (layers of one model repeat their shapes), so after
// the first forward no staging page is new: the kernel zeroes nothing.
#include "ferry/io/staged_reader.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/core/storage.h"

namespace ferry::io {
namespace {

constexpr std::size_t kBlock = 4096;
constexpr std::size_t kHugePage = std::size_t{2} << 20;

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

using Clock = std::chrono::steady_clock;
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

struct StagedReader::Impl {
  struct Read;
  struct Chunk {
    std::shared_ptr<Read> read;
    std::size_t pos = 0, len = 0;  // relative to the read's aligned offset
  };
  struct Read {
    FileRange range;
    int fd = -1;
    std::uint64_t aligned_offset = 0;
    std::size_t head = 0;    // range.offset - aligned_offset
    std::size_t length = 0;  // bytes to read (whole blocks)
    void* buf = nullptr;
    std::size_t buf_size = 0;
    bool overflow = false;
    std::deque<Chunk> pending;
    std::size_t in_flight = 0;
    bool done = false, prefetched = false, taken = false;
    std::string error;
    std::uint64_t seq = 0;
  };
  // State shared with the release callbacks of tensors, which may outlive the reader.
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;  // a read completed, a buffer came back, or work arrived
    std::multimap<std::size_t, void*> free;
    std::size_t total = 0;     // allocated bytes, free ones included
    std::size_t overflow = 0;  // of which beyond the pool's size
    std::size_t live = 0;      // bytes held by tensors
    StagedReaderStats stats;
    std::size_t capacity = 0;  // the pool's size (StagedReaderOptions::pool_bytes)
    std::function<void*(std::size_t)> allocate;
    std::function<void(void*, std::size_t)> release;
    ~Shared() {
      for (auto& [n, p] : free) release(p, n);
    }
    // A buffer a caller kept (take(..., keep)) that it no longer needs (mu held): into the pool for the next read of
    // its size. A cache drops one as it keeps another, which left the pool a moment before and whose room the pool
    // may have filled since: a quarter over the pool's size is allowed for it (the next acquire takes it, or trims
    // it), rather than free it and fault in a fresh buffer for the next read.
    void adopt_locked(void* p, std::size_t n) {
      if (total + n <= capacity + capacity / 4) {
        total += n;
        free.emplace(n, p);
      } else {
        release(p, n);
      }
      cv.notify_all();
    }
    // A buffer back from a read or a tensor (mu held): kept for reuse while the pool is within its size, freed
    // otherwise.
    void give_back_locked(void* p, std::size_t n, bool is_overflow) {
      if (!p) return;
      if (is_overflow || total > capacity) {
        release(p, n);
        total -= n;
        if (is_overflow) overflow -= n;
      } else {
        free.emplace(n, p);
      }
      cv.notify_all();
    }
  };

  StagedReaderOptions options;
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
  std::unordered_map<std::string, std::shared_ptr<Read>> reads;  // prefetched, not taken yet
  std::deque<std::shared_ptr<Read>> queue;                       // reads with chunks to submit
  std::unordered_map<std::string, int> files;
  std::function<int(const char*, int)> open_file;
  std::uint64_t next_seq = 0;
  std::uint64_t last_taken_seq = 0;  // the newest prefetched read taken: older ones not taken were passed by
  std::uint64_t takes = 0;           // take() calls so far
  bool stop = false;
  io_uring ring{};
  bool have_ring = false;
  std::thread thread;

  explicit Impl(StagedReaderOptions o) : options(std::move(o)) {
    if (options.chunk_bytes == 0 || options.chunk_bytes % kBlock != 0)
      throw Error("chunk_bytes must be a positive multiple of 4096, got " + std::to_string(options.chunk_bytes),
                  "StagedReader");
    if (options.queue_depth == 0) throw Error("queue_depth must be at least 1", "StagedReader");
    shared->capacity = options.pool_bytes;
    // Default staging memory: host memory on 4096-byte boundaries (O_DIRECT's), 2 MiB ones with huge pages when large.
    shared->allocate = options.allocate ? options.allocate : [](std::size_t n) { return aligned_host_alloc(n, kBlock); };
    shared->release = options.release ? options.release : [](void* p, std::size_t) { aligned_host_free(p); };
    open_file = options.open_file ? options.open_file : [](const char* p, int flags) { return ::open(p, flags); };
    if (options.use_io_uring) {
      const int rc = io_uring_queue_init(options.queue_depth, &ring, 0);
      if (rc == 0) {
        have_ring = true;
      } else {
        log_once(LogLevel::Warning, "io_uring is not available (" + std::string(std::strerror(-rc)) +
                                        "): offloaded weights are read with pread()");
      }
    }
    shared->stats.io_uring = have_ring;
    shared->stats.direct = options.direct;
    thread = std::thread([this] { run(); });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      stop = true;
    }
    shared->cv.notify_all();
    thread.join();
    if (have_ring) io_uring_queue_exit(&ring);
    std::lock_guard<std::mutex> lock(shared->mu);
    // A chunk not submitted when the reader stopped holds its read, which holds the chunk: break that cycle.
    for (auto& r : queue) r->pending.clear();
    for (auto& [key, r] : reads) {
      r->pending.clear();
      shared->give_back_locked(r->buf, r->buf_size, r->overflow);
    }
    for (auto& [path, fd] : files) ::close(fd);
  }

  // ---- staging memory (shared->mu held) ----

  // Evicts the oldest prefetched read that completed, was not taken, and is older than the last prefetched read
  // taken: the forward passed it by (the order changed), so nothing will take it. False when there is none.
  bool evict_stale_locked() {
    auto oldest = reads.end();
    for (auto it = reads.begin(); it != reads.end(); ++it)
      if (it->second->done && it->second->seq < last_taken_seq &&
          (oldest == reads.end() || it->second->seq < oldest->second->seq))
        oldest = it;
    if (oldest == reads.end()) return false;
    shared->give_back_locked(oldest->second->buf, oldest->second->buf_size, oldest->second->overflow);
    oldest->second->buf = nullptr;
    reads.erase(oldest);
    ++shared->stats.evicted;
    return true;
  }

  // A buffer of at least n bytes. may_wait: a prefetch, which waits for room; otherwise (a forward needs the bytes
  // now) the pool grows beyond its size rather than wait for a prefetch that may be what holds the room.
  bool acquire_locked(Read& r, std::unique_lock<std::mutex>& lock, bool may_wait) {
    const std::size_t n = r.length;
    for (;;) {
      auto it = shared->free.lower_bound(n);
      if (it != shared->free.end() && it->first <= n + n / 4 + kHugePage) {
        r.buf = it->second;
        r.buf_size = it->first;
        shared->free.erase(it);
        return true;
      }
      while (shared->total + n > shared->capacity && !shared->free.empty()) {
        auto big = std::prev(shared->free.end());
        shared->release(big->second, big->first);
        shared->total -= big->first;
        shared->free.erase(big);
      }
      const bool fits = shared->total + n <= shared->capacity;
      if (fits || !may_wait) {
        r.buf = shared->allocate(n);
        if (!r.buf)
          throw Error(ErrorKind::OutOfMemory, "out of memory for a staging buffer of " + std::to_string(n) + " bytes",
                      "StagedReader");
        r.buf_size = n;
        r.overflow = !fits;
        shared->total += n;
        if (r.overflow) {
          shared->overflow += n;
          shared->stats.overflow_peak = std::max(shared->stats.overflow_peak, shared->overflow);
        }
        shared->stats.pool_peak = std::max(shared->stats.pool_peak, shared->total);
        return true;
      }
      if (stop) return false;
      // Full. Reads the forward passed by go first; then tensors in use or reads in flight will free room.
      if (evict_stale_locked()) continue;
      bool busy = shared->live > 0 || !queue.empty();
      for (auto& [key, other] : reads) busy = busy || !other->done;
      if (busy) {
        shared->cv.wait(lock);
        continue;
      }
      if (reads.empty()) {  // nothing will ever free room: the pool is smaller than this one tensor. Read it anyway.
        may_wait = false;
        continue;
      }
      // Only completed reads ahead of the forward hold the room: it takes them next, so wait for a take. Bounded: a
      // run that stops here never takes them; then this one is not read ahead (the forward reads it when needed).
      // Evicting them instead would read them twice (issue 41: a third of the prefetches, with depth 2).
      const std::uint64_t before = takes;
      if (!shared->cv.wait_for(lock, std::chrono::seconds(1), [&] { return stop || takes != before; })) {
        ++shared->stats.declined;
        return false;
      }
    }
  }

  // ---- reads ----

  static std::string key_of(const FileRange& range) {
    return range.path.string() + "@" + std::to_string(range.offset) + "+" + std::to_string(range.length);
  }

  int file_locked(const std::filesystem::path& path) {
    auto it = files.find(path.string());
    if (it != files.end()) return it->second;
    int fd = -1;
    if (options.direct) {
      fd = open_file(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
      if (fd < 0 && errno == EINVAL) {
        log_once(LogLevel::Warning, "the filesystem of " + path.parent_path().string() +
                                        " refuses O_DIRECT: its offloaded weights are read through the page cache");
        shared->stats.direct = false;
      }
    }
    if (fd < 0) fd = open_file(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      throw Error(error_kind_from_errno(err), std::string("cannot open: ") + std::strerror(err), path.string(),
                  "the offloaded weights' file must stay where it was when the model was planned");
    }
    files.emplace(path.string(), fd);
    return fd;
  }

  std::shared_ptr<Read> start_locked(const FileRange& range, std::unique_lock<std::mutex>& lock, bool may_wait,
                                     bool front) {
    auto r = std::make_shared<Read>();
    r->range = range;
    r->fd = file_locked(range.path);
    r->aligned_offset = range.offset / kBlock * kBlock;
    r->head = static_cast<std::size_t>(range.offset - r->aligned_offset);
    r->length = round_up(r->head + range.length, kBlock);
    r->seq = next_seq++;
    if (!acquire_locked(*r, lock, may_wait)) return nullptr;
    for (std::size_t pos = 0; pos < r->length; pos += options.chunk_bytes)
      r->pending.push_back(Chunk{r, pos, std::min(options.chunk_bytes, r->length - pos)});
    if (front) queue.push_front(r);
    else queue.push_back(r);
    shared->cv.notify_all();
    return r;
  }

  // A chunk's result: res bytes read (or -errno).
  void complete_locked(Chunk& c, long res) {
    Read& r = *c.read;
    --r.in_flight;
    const std::uint64_t need_end = r.range.offset + r.range.length;  // absolute
    const std::uint64_t chunk_start = r.aligned_offset + c.pos;
    if (res < 0) {
      if (r.error.empty()) r.error = std::string("read failed: ") + std::strerror(static_cast<int>(-res));
    } else {
      shared->stats.bytes_read += static_cast<std::uint64_t>(res);
      const auto got = static_cast<std::size_t>(res);
      if (got < c.len && chunk_start + got < need_end) {
        if (got == 0) {
          if (r.error.empty())
            r.error = "the file ends at byte " + std::to_string(chunk_start) + ", before the tensor's bytes [" +
                      std::to_string(r.range.offset) + ", " + std::to_string(need_end) + ")";
        } else {
          r.pending.push_front(Chunk{c.read, c.pos + got, c.len - got});  // short read: the rest again
          if (std::find(queue.begin(), queue.end(), c.read) == queue.end()) queue.push_front(c.read);
        }
      }
    }
    if (r.in_flight == 0 && (r.pending.empty() || !r.error.empty())) {
      r.pending.clear();
      r.done = true;
      shared->cv.notify_all();
    }
  }

  void run() {
    std::unique_lock<std::mutex> lock(shared->mu);
    std::size_t in_flight = 0;
    Clock::time_point busy_since{};
    for (;;) {
      shared->cv.wait(lock, [&] { return stop || !queue.empty() || in_flight > 0; });
      if (stop && in_flight == 0) return;
      // Gather chunks to submit, up to the queue depth.
      std::vector<Chunk*> batch;
      while (!stop && in_flight + batch.size() < options.queue_depth && !queue.empty()) {
        auto& r = queue.front();
        if (r->pending.empty() || !r->error.empty()) {
          queue.pop_front();
          continue;
        }
        batch.push_back(new Chunk(std::move(r->pending.front())));
        r->pending.pop_front();
        ++r->in_flight;
        if (r->pending.empty()) queue.pop_front();  // all of it submitted (a short read queues it again)
      }
      if (batch.empty() && in_flight == 0) continue;  // only finished reads were queued: nothing to wait for
      if (in_flight == 0 && !batch.empty()) busy_since = Clock::now();
      if (!have_ring) {  // pread, one chunk at a time
        for (std::size_t i = 0; i < batch.size(); ++i) {
          Chunk* c = batch[i];
          lock.unlock();
          const ssize_t n = ::pread(c->read->fd, static_cast<char*>(c->read->buf) + c->pos, c->len,
                                    static_cast<off_t>(c->read->aligned_offset + c->pos));
          const long res = n < 0 ? -errno : n;
          lock.lock();
          complete_locked(*c, res);
          delete c;
        }
        if (!batch.empty()) shared->stats.read_seconds += seconds(Clock::now() - busy_since);
        continue;
      }
      for (Chunk* c : batch) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        io_uring_prep_read(sqe, c->read->fd, static_cast<char*>(c->read->buf) + c->pos, static_cast<unsigned>(c->len),
                           c->read->aligned_offset + c->pos);
        io_uring_sqe_set_data(sqe, c);
      }
      in_flight += batch.size();
      lock.unlock();
      for (std::size_t submitted = 0; submitted < batch.size();) {
        const int n = io_uring_submit(&ring);
        if (n > 0) {
          submitted += static_cast<std::size_t>(n);
        } else if (n == -EINTR || n == -EAGAIN || n == -EBUSY || n == 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));  // the kernel is short of resources: retry
        } else {
          log_once(LogLevel::Error, std::string("io_uring_submit failed: ") + std::strerror(-n) + "; retrying");
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
      io_uring_cqe* cqe = nullptr;
      int rc = io_uring_wait_cqe(&ring, &cqe);
      lock.lock();
      while (rc == 0 && cqe) {
        auto* c = static_cast<Chunk*>(io_uring_cqe_get_data(cqe));
        const long res = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        --in_flight;
        complete_locked(*c, res);
        delete c;
        cqe = nullptr;
        rc = io_uring_peek_cqe(&ring, &cqe);
      }
      if (in_flight == 0) shared->stats.read_seconds += seconds(Clock::now() - busy_since);
    }
  }

  Tensor wrap(const std::shared_ptr<Read>& r, const Shape& shape, DType dtype, bool keep) {
    // The storage gives its buffer back to the pool when the last tensor viewing it goes. Kept: the buffer leaves the
    // pool now and may join it again then.
    const bool overflow = r->overflow;
    const std::size_t n = r->buf_size;
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      if (keep) {
        shared->total -= n;
        if (overflow) shared->overflow -= n;
        ++shared->stats.kept;
        shared->cv.notify_all();  // room for a prefetch waiting
      } else {
        shared->live += n;
      }
    }
    auto storage = Storage::adopt(Device::cpu(), r->buf, n, [sh = shared, n, overflow, keep](void* p) {
      std::lock_guard<std::mutex> lock(sh->mu);
      if (keep) {
        sh->adopt_locked(p, n);
      } else {
        sh->live -= n;
        sh->give_back_locked(p, n, overflow);
      }
    });
    r->buf = nullptr;
    Tensor t = Tensor::from_storage(std::move(storage), r->head, shape, dtype);
    // Typed kernels must not see a misaligned pointer (a hand-made safetensors file may not align its tensors).
    if (!is_quantized(dtype) && r->head % dtype_size(dtype) != 0) return t.clone();
    return t;
  }
};

StagedReader::StagedReader(StagedReaderOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
StagedReader::~StagedReader() = default;

const StagedReaderOptions& StagedReader::options() const noexcept { return impl_->options; }

bool StagedReader::prefetch(const FileRange& range) noexcept {
  if (range.length == 0) return false;
  try {
    std::unique_lock<std::mutex> lock(impl_->shared->mu);
    const std::string key = Impl::key_of(range);
    if (impl_->reads.count(key)) return true;  // being read or staged: the bytes do come from disk
    auto r = impl_->start_locked(range, lock, /*may_wait=*/true, /*front=*/false);
    if (!r) return false;
    r->prefetched = true;
    impl_->reads.emplace(key, std::move(r));
    return true;
  } catch (const std::exception&) {
    return false;  // take() reads again and reports the reason
  }
}

Tensor StagedReader::take(const FileRange& range, const Shape& shape, DType dtype, bool keep) {
  const std::size_t want = dtype_nbytes(dtype, shape_numel(shape));
  if (want != range.length)
    throw Error("the range holds " + std::to_string(range.length) + " bytes, but " + shape_str(shape) + " " +
                    std::string(dtype_name(dtype)) + " needs " + std::to_string(want),
                range.path.string());
  if (range.length == 0) return Tensor::empty(shape, dtype);
  auto& shared = *impl_->shared;
  std::unique_lock<std::mutex> lock(shared.mu);
  std::shared_ptr<Impl::Read> r;
  auto it = impl_->reads.find(Impl::key_of(range));
  if (it != impl_->reads.end()) {
    r = std::move(it->second);
    impl_->reads.erase(it);
    ++shared.stats.prefetched;
    impl_->last_taken_seq = std::max(impl_->last_taken_seq, r->seq);
    // Not started yet: read it before the prefetches queued after it.
    auto q = std::find(impl_->queue.begin(), impl_->queue.end(), r);
    if (q != impl_->queue.end() && r->in_flight == 0) {
      impl_->queue.erase(q);
      impl_->queue.push_front(r);
    }
  } else {
    r = impl_->start_locked(range, lock, /*may_wait=*/false, /*front=*/true);
  }
  ++impl_->takes;
  shared.cv.notify_all();  // a prefetch waiting for room may go on (a take, and reads passed by)
  const auto t0 = Clock::now();
  shared.cv.wait(lock, [&] { return r->done; });
  shared.stats.wait_seconds += seconds(Clock::now() - t0);
  ++shared.stats.tensors;
  if (!r->error.empty()) {
    shared.give_back_locked(r->buf, r->buf_size, r->overflow);
    r->buf = nullptr;
    throw Error(r->error, range.path.string(),
                "the file changed after the model was planned (truncated?); restore it or plan again");
  }
  lock.unlock();
  return impl_->wrap(r, shape, dtype, keep);
}

void StagedReader::read_rows(const FileRange& range, std::size_t row_bytes, std::span<const int64_t> rows, void* out) {
  if (rows.empty() || row_bytes == 0) return;
  // Rows closer than this share one read; no read is longer than kLongest unless a row is.
  constexpr std::uint64_t kGap = 64 << 10, kLongest = 2 << 20;
  struct Window {
    std::uint64_t begin, end;
    std::size_t first, last;  // rows[first, last)
  };
  std::vector<Window> windows;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::uint64_t at = range.offset + static_cast<std::uint64_t>(rows[i]) * row_bytes;
    if (rows[i] < 0 || at + row_bytes > range.offset + range.length)
      throw Error("row " + std::to_string(rows[i]) + " is outside the " + std::to_string(range.length / row_bytes) +
                      " rows of the range",
                  range.path.string());
    const std::uint64_t begin = at / kBlock * kBlock, end = round_up(at + row_bytes, kBlock);
    if (!windows.empty() && begin <= windows.back().end + kGap && end - windows.back().begin <= kLongest) {
      windows.back().end = std::max(windows.back().end, end);
      windows.back().last = i + 1;
    } else {
      windows.push_back({begin, end, i, i + 1});
    }
  }
  std::size_t longest = 0;
  for (const Window& w : windows) longest = std::max<std::size_t>(longest, w.end - w.begin);
  int fd;
  {
    std::lock_guard<std::mutex> lock(impl_->shared->mu);
    fd = impl_->file_locked(range.path);
  }
  std::unique_ptr<char, void (*)(char*)> buf(static_cast<char*>(aligned_host_alloc(longest, kBlock)),
                                             [](char* p) { aligned_host_free(p); });
  std::uint64_t total = 0;
  const auto t0 = Clock::now();
  for (const Window& w : windows) {
    const std::uint64_t need = range.offset + static_cast<std::uint64_t>(rows[w.last - 1]) * row_bytes + row_bytes;
    std::uint64_t got = 0;
    while (w.begin + got < need) {
      const ssize_t n = ::pread(fd, buf.get() + got, w.end - w.begin - got, static_cast<off_t>(w.begin + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error(std::string("read failed: ") + std::strerror(errno), range.path.string());
      if (n == 0)
        throw Error("the file ends at byte " + std::to_string(w.begin + got) + ", before the rows' bytes",
                    range.path.string(),
                    "the file changed after the model was planned (truncated?); restore it or plan again");
      got += static_cast<std::uint64_t>(n);
    }
    total += got;
    for (std::size_t i = w.first; i < w.last; ++i) {
      const std::uint64_t at = range.offset + static_cast<std::uint64_t>(rows[i]) * row_bytes;
      std::memcpy(static_cast<char*>(out) + i * row_bytes, buf.get() + (at - w.begin), row_bytes);
    }
  }
  std::lock_guard<std::mutex> lock(impl_->shared->mu);
  impl_->shared->stats.bytes_read += total;
  impl_->shared->stats.rows += rows.size();
  impl_->shared->stats.read_seconds += seconds(Clock::now() - t0);
}

StagedReaderStats StagedReader::stats() const {
  std::lock_guard<std::mutex> lock(impl_->shared->mu);
  return impl_->shared->stats;
}

}  // namespace ferry::io
