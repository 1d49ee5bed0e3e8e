// StagedReader: offloaded weights read from disk without relying on the page cache, for models whose disk part does
// not fit in RAM. Reads are O_DIRECT, queued deep through io_uring, into a bounded pool of staging buffers that are
// reused from one module to the next (no fresh pages to zero, nothing left in the page cache to evict).
//
// The Prefetcher (big_modeling/prefetch.h) calls prefetch() for the modules about to run; the module's hook calls
// take() when it runs, which waits for the read in flight (or reads at once if nothing was prefetched). The tensor
// take() returns views its staging buffer, which goes back to the pool when the last view of it is dropped (the hook
// puts the weight back on meta after the forward). So the pool bounds what offloading holds in RAM.
//
// Falls back, with one warning each, to buffered reads when the filesystem refuses O_DIRECT (tmpfs, some FUSE
// mounts) and to pread() when io_uring is unavailable (old kernels, seccomp). Staging memory is plain host memory
// now; a CUDA build gives the pool pinned memory through the same interface (StagedReaderOptions::allocate).
//
// No Accelerate counterpart (Accelerate maps .dat files with numpy.memmap, i.e. the page cache). The pattern is the
// one of DeepSpeed ZeRO-Infinity's NVMe offload (aio with a deep queue into pinned buffers).
//
//   io::StagedReader reader({.pool_bytes = 512 << 20});
//   reader.prefetch(io::FileRange{"offload/w.dat", 0, n});                    // on the prefetch thread
//   Tensor w = reader.take(io::FileRange{"offload/w.dat", 0, n}, {4096, 4096}, DType::BF16);  // in the forward
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"

namespace ferry::io {

/// Where the bytes of one tensor are: `length` bytes at `offset` of `path`.
struct FileRange {
  std::filesystem::path path;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

struct StagedReaderOptions {
  std::size_t pool_bytes = std::size_t{256} << 20;  ///< staging memory for reads in flight and tensors in use
  unsigned queue_depth = 16;                        ///< reads in flight at once (io_uring)
  std::size_t chunk_bytes = std::size_t{1} << 20;   ///< size of one read (a multiple of 4096)
  bool use_io_uring = true;                         ///< false: pread() on the reader thread
  bool direct = true;                               ///< false: buffered reads (still staged and bounded)
  /// Allocates `n` bytes of staging memory, 4096-aligned (default: huge-page host memory); `release` frees it.
  std::function<void*(std::size_t n)> allocate;
  std::function<void(void*, std::size_t n)> release;
  /// Opens a file as open(2) would (flags include O_DIRECT unless direct is false); default ::open. Lets tests
  /// stand in for a filesystem that refuses O_DIRECT.
  std::function<int(const char* path, int flags)> open_file;
};

struct StagedReaderStats {
  std::uint64_t tensors = 0;         ///< take() calls served
  std::uint64_t bytes_read = 0;      ///< bytes read from files (with alignment padding)
  std::uint64_t prefetched = 0;      ///< take() calls whose read a prefetch had started
  std::uint64_t evicted = 0;         ///< prefetched reads dropped unused (the forward passed them by)
  std::uint64_t declined = 0;        ///< prefetches not started: the pool held only reads still to be taken
  std::uint64_t kept = 0;            ///< take(..., keep) calls: buffers handed over to a cache
  std::uint64_t rows = 0;            ///< rows read by read_rows (their bytes count in bytes_read)
  double read_seconds = 0;           ///< wall time the reader thread had reads in flight
  double wait_seconds = 0;           ///< time take() callers spent waiting for bytes
  std::size_t pool_peak = 0;         ///< most staging memory allocated at once
  std::size_t overflow_peak = 0;     ///< most memory allocated beyond pool_bytes (reads nobody prefetched)
  bool io_uring = false;             ///< io_uring ran (else pread)
  bool direct = false;               ///< every file was read with O_DIRECT
};

class StagedReader {
 public:
  explicit StagedReader(StagedReaderOptions options = {});
  ~StagedReader();
  StagedReader(const StagedReader&) = delete;
  StagedReader& operator=(const StagedReader&) = delete;

  /// Starts reading `range` into a staging buffer unless it is already staged or being read. Returns at once unless
  /// the pool is full; then drops completed reads the forward passed by (older than a prefetched read it took), or
  /// waits until tensors in use are released; when only completed reads still ahead of the forward hold the pool,
  /// waits up to 1 s for the forward to take one, then gives up (stats().declined). Never throws: take() reports a
  /// failed read. Returns whether it started a read (or one was under way).
  bool prefetch(const FileRange& range) noexcept;

  /// The bytes of `range` as a tensor of `shape` and `dtype` (whose size must equal range.length), viewing a staging
  /// buffer; waits for a prefetch in flight or reads at once. Each prefetch is taken once: a second take() reads
  /// again. Throws ferry::Error naming the file when it cannot be opened or read, or ends before the range (a file
  /// truncated after planning). `keep`: the caller keeps the tensor (a cache of what was read): its buffer leaves the
  /// pool at once, so the pool's room serves the next reads, and joins the pool again when the last view goes (freed
  /// instead when the pool is full by then). The buffer may be larger than the range (storage()->nbytes()).
  Tensor take(const FileRange& range, const Shape& shape, DType dtype, bool keep = false);

  /// Reads rows `rows` (ascending, distinct) of the `row_bytes`-byte rows that fill `range` into `out` (rows.size()
  /// × row_bytes bytes), now, on the calling thread: the blocks around each row (rows close together in one read),
  /// outside the pool — an embedding lookup of a table on disk reads a row per token, not the table. Throws
  /// ferry::Error naming the file when it cannot be read or ends early.
  void read_rows(const FileRange& range, std::size_t row_bytes, std::span<const int64_t> rows, void* out);

  StagedReaderStats stats() const;
  const StagedReaderOptions& options() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::io
