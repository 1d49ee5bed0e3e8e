// StagedReader: O_DIRECT + io_uring reads into a bounded staging pool. Bytes must equal the file's for any offset and
// size (unaligned heads and tails, tensors smaller than a block, ranges ending at EOF), on every path (io_uring or
// pread, O_DIRECT or buffered); the pool stays within its size; a file truncated after planning is a clear error,
// never a hang; a filesystem refusing O_DIRECT falls back with one warning.
#include "ferry/io/staged_reader.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <chrono>
#include <thread>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "support/hf_folder.h"

namespace ferry::io {
namespace {

namespace fs = std::filesystem;

std::string random_bytes(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

fs::path write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return p;
}

std::string bytes_of(const Tensor& t) { return std::string(static_cast<const char*>(t.raw_data()), t.nbytes()); }

// Whether the filesystem holding `p` takes O_DIRECT (tmpfs did not before Linux 6.6).
bool accepts_o_direct(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

struct Mode {
  const char* name;
  bool io_uring, direct;
};
const Mode kModes[] = {{"io_uring+O_DIRECT", true, true}, {"pread+O_DIRECT", false, true}, {"io_uring+buffered", true, false}};

TEST(StagedReader, OddOffsetsAndSizesReadTheFileBytesOnEveryPath) {
  test::TempDir dir;
  const std::string data = random_bytes((3u << 20) + 123, 1);
  const fs::path file = write_file(dir.path() / "w.bin", data);
  const std::vector<std::pair<std::size_t, std::size_t>> ranges = {
      {0, 1}, {1, 4095}, {4095, 2}, {4096, 4096}, {3 * 4096 + 17, (1u << 20) + 5}, {100, 3000},
      {data.size() - 7, 7}, {data.size() - (2u << 20) - 1, (2u << 20) + 1}, {0, data.size()}};
  for (const Mode& m : kModes) {
    SCOPED_TRACE(m.name);
    StagedReader reader({.pool_bytes = 16u << 20, .queue_depth = 4, .chunk_bytes = 256u << 10,
                         .use_io_uring = m.io_uring, .direct = m.direct});
    for (const bool ahead : {false, true}) {
      for (const auto& [offset, length] : ranges) {
        const FileRange r{file, offset, length};
        if (ahead) {
          EXPECT_TRUE(reader.prefetch(r));
        }
        const Tensor t = reader.take(r, {static_cast<int64_t>(length)}, DType::U8);
        ASSERT_EQ(bytes_of(t), data.substr(offset, length)) << offset << "+" << length << (ahead ? " prefetched" : "");
      }
    }
    const auto s = reader.stats();
    EXPECT_EQ(s.tensors, 2 * ranges.size());
    EXPECT_EQ(s.prefetched, ranges.size());
    EXPECT_EQ(s.direct, m.direct && accepts_o_direct(file));
    EXPECT_EQ(s.overflow_peak, 0u);
    EXPECT_LE(s.pool_peak, 16u << 20);
  }
}

TEST(StagedReader, TypedTensorsAndMisalignedOffsetsAreUsable) {
  test::TempDir dir;
  std::vector<float> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  std::string bytes(3, 'x');  // the floats start at offset 3: not aligned to their size
  bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  const fs::path file = write_file(dir.path() / "f.bin", bytes);
  StagedReader reader;
  const Tensor t = reader.take({file, 3, 4000}, {10, 100}, DType::F32);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 4, 0u);
  EXPECT_EQ(t.to_vector<float>(), values);
  EXPECT_THROW(reader.take({file, 3, 3999}, {10, 100}, DType::F32), Error);  // size disagrees with shape
}

TEST(StagedReader, ThePoolStaysWithinItsSizeAndBuffersAreReused) {
  test::TempDir dir;
  const std::string data = random_bytes(8u << 20, 2);
  const fs::path file = write_file(dir.path() / "w.bin", data);
  StagedReader reader({.pool_bytes = 3u << 20});
  // A pipeline two deep: read ahead, take, release; 8 layers of 1 MiB, twice (a second forward reuses buffers).
  for (int pass = 0; pass < 2; ++pass) {
    reader.prefetch({file, 0, 1u << 20});
    for (std::size_t i = 0; i < 8; ++i) {
      if (i + 1 < 8) reader.prefetch({file, (i + 1) << 20, 1u << 20});
      const Tensor t = reader.take({file, i << 20, 1u << 20}, {1 << 20}, DType::U8);
      ASSERT_EQ(bytes_of(t), data.substr(i << 20, 1u << 20));
    }
  }
  const auto s = reader.stats();
  EXPECT_LE(s.pool_peak, 3u << 20);
  EXPECT_EQ(s.overflow_peak, 0u);
  EXPECT_EQ(s.prefetched, 16u);
}

// take(..., keep): a cache keeps the staging buffer itself. It leaves the pool at once (reads go on in the pool's room
// while the cache holds it, its bytes untouched) and joins the pool again when the cache drops it.
TEST(StagedReader, AKeptBufferLeavesThePoolAndComesBackWhenDropped) {
  test::TempDir dir;
  const std::string data = random_bytes(4u << 20, 5);
  const fs::path file = write_file(dir.path() / "w.bin", data);
  StagedReader reader({.pool_bytes = 2u << 20});
  Tensor a = reader.take({file, 0, 1u << 20}, {1 << 20}, DType::U8, /*keep=*/true);
  Tensor b = reader.take({file, 1u << 20, 1u << 20}, {1 << 20}, DType::U8, /*keep=*/true);
  // Both held: without keep the pool would be full of tensors in use and these prefetches would wait for them.
  EXPECT_TRUE(reader.prefetch({file, 2u << 20, 1u << 20}));
  EXPECT_TRUE(reader.prefetch({file, 3u << 20, 1u << 20}));
  EXPECT_EQ(bytes_of(reader.take({file, 2u << 20, 1u << 20}, {1 << 20}, DType::U8)), data.substr(2u << 20, 1u << 20));
  EXPECT_EQ(bytes_of(reader.take({file, 3u << 20, 1u << 20}, {1 << 20}, DType::U8)), data.substr(3u << 20, 1u << 20));
  EXPECT_EQ(bytes_of(a), data.substr(0, 1u << 20)) << "a kept buffer is never read into again";
  EXPECT_EQ(bytes_of(b), data.substr(1u << 20, 1u << 20));
  auto s = reader.stats();
  EXPECT_EQ(s.kept, 2u);
  EXPECT_EQ(s.overflow_peak, 0u);
  EXPECT_LE(s.pool_peak, 2u << 20);
  // A dropped kept buffer joins a pool with room, and the next read reuses it.
  StagedReader small({.pool_bytes = 1u << 20});
  Tensor kept = small.take({file, 0, 1u << 20}, {1 << 20}, DType::U8, /*keep=*/true);
  const void* where = kept.raw_data();
  kept = Tensor();  // back into the pool, which was empty
  const Tensor next = small.take({file, 1u << 20, 1u << 20}, {1 << 20}, DType::U8);
  EXPECT_EQ(next.raw_data(), where);
  EXPECT_EQ(bytes_of(next), data.substr(1u << 20, 1u << 20));
  EXPECT_LE(small.stats().pool_peak, 1u << 20);
}

// A pool full of completed reads nobody takes: a prefetch gives up (after a bounded wait) instead of blocking, and
// the forward still gets its bytes.
TEST(StagedReader, PrefetchesFindingThePoolFullOfReadsAheadGiveUpInsteadOfBlocking) {
  test::TempDir dir;
  const std::string data = random_bytes(4u << 20, 3);
  const fs::path file = write_file(dir.path() / "w.bin", data);
  StagedReader reader({.pool_bytes = 2u << 20});
  EXPECT_TRUE(reader.prefetch({file, 0, 1u << 20}));
  EXPECT_TRUE(reader.prefetch({file, 1u << 20, 1u << 20}));
  EXPECT_FALSE(reader.prefetch({file, 2u << 20, 1u << 20}));  // only two fit; the two are never taken
  const Tensor t = reader.take({file, 3u << 20, 1u << 20}, {1 << 20}, DType::U8);
  EXPECT_EQ(bytes_of(t), data.substr(3u << 20));
  EXPECT_EQ(reader.stats().declined, 1u);
  EXPECT_EQ(reader.stats().evicted, 0u);
}

// Reads the forward passed by (older than a prefetched read it took) are dropped to make room, at once.
TEST(StagedReader, ReadsTheForwardPassedByAreEvicted) {
  test::TempDir dir;
  const std::string data = random_bytes(4u << 20, 3);
  const fs::path file = write_file(dir.path() / "w.bin", data);
  StagedReader reader({.pool_bytes = 2u << 20});
  reader.prefetch({file, 0, 1u << 20});
  reader.prefetch({file, 1u << 20, 1u << 20});
  { const Tensor skipped_0 = reader.take({file, 1u << 20, 1u << 20}, {1 << 20}, DType::U8); }
  EXPECT_TRUE(reader.prefetch({file, 2u << 20, 1u << 20}));  // room: the released buffer
  EXPECT_TRUE(reader.prefetch({file, 3u << 20, 1u << 20}));  // room: read 0, passed by
  EXPECT_EQ(reader.stats().evicted, 1u);
  EXPECT_EQ(reader.stats().declined, 0u);
  EXPECT_EQ(bytes_of(reader.take({file, 3u << 20, 1u << 20}, {1 << 20}, DType::U8)), data.substr(3u << 20));
}

// Issue 41: between two modules nothing is in use and the reads ahead are complete; a prefetch then waits for the
// forward to take them, instead of dropping the next module's read (which the forward then read again: a third of
// the bytes, with prefetch 2 on a TinyLlama-shaped model).
TEST(StagedReader, AReadAheadIsNotDroppedBeforeTheForwardTakesIt) {
  test::TempDir dir;
  const std::string data = random_bytes(4u << 20, 3);
  const fs::path file = write_file(dir.path() / "w.bin", data);
  StagedReader reader({.pool_bytes = 3u << 20});
  for (std::size_t i = 0; i < 3; ++i) reader.prefetch({file, i << 20, 1u << 20});
  { const Tensor module_0 = reader.take({file, 0, 1u << 20}, {1 << 20}, DType::U8); }  // ran, released
  std::thread forward([&] {                                                            // module 1 starts a little later
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const Tensor module_1 = reader.take({file, 1u << 20, 1u << 20}, {1 << 20}, DType::U8);
    EXPECT_EQ(bytes_of(module_1), data.substr(1u << 20, 1u << 20));
  });
  EXPECT_TRUE(reader.prefetch({file, 3u << 20, 1u << 20}));  // waits for module 1's take and release
  forward.join();
  EXPECT_EQ(bytes_of(reader.take({file, 2u << 20, 1u << 20}, {1 << 20}, DType::U8)), data.substr(2u << 20, 1u << 20));
  EXPECT_EQ(bytes_of(reader.take({file, 3u << 20, 1u << 20}, {1 << 20}, DType::U8)), data.substr(3u << 20));
  const auto s = reader.stats();
  EXPECT_EQ(s.evicted, 0u);
  EXPECT_EQ(s.declined, 0u);
  EXPECT_EQ(s.prefetched, 4u);
  EXPECT_EQ(s.bytes_read, 4u << 20);  // every byte read once
}

// A reader destroyed with prefetches still queued frees them (a queued chunk holds its read: the sanitizer run
// reports the cycle as a leak; the CLI met it when a run ended while the prefetcher was ahead).
TEST(StagedReader, AReaderDestroyedWithPrefetchesQueuedFreesThem) {
  test::TempDir dir;
  const std::string data = random_bytes(8u << 20, 5);
  const fs::path file = write_file(dir.path() / "w.bin", data);
  for (const Mode& m : kModes) {
    SCOPED_TRACE(m.name);
    std::size_t allocated = 0, released = 0;
    {
      StagedReader reader({.pool_bytes = 16u << 20,
                           .queue_depth = 1,
                           .chunk_bytes = 4096,
                           .use_io_uring = m.io_uring,
                           .direct = m.direct && accepts_o_direct(file),
                           .allocate = [&](std::size_t n) { ++allocated; return std::aligned_alloc(4096, n); },
                           .release = [&](void* p, std::size_t) { ++released; std::free(p); }});
      for (std::size_t i = 0; i < 8; ++i) EXPECT_TRUE(reader.prefetch({file, i << 20, 1u << 20}));
    }
    EXPECT_EQ(allocated, released);
  }
}

TEST(StagedReader, ATensorOutlivesItsReader) {
  test::TempDir dir;
  const std::string data = random_bytes(10000, 4);
  const fs::path file = write_file(dir.path() / "w.bin", data);
  Tensor t;
  {
    StagedReader reader;
    t = reader.take({file, 5, 9000}, {9000}, DType::U8);
  }
  EXPECT_EQ(bytes_of(t), data.substr(5, 9000));
}

TEST(StagedReader, AFileTruncatedAfterPlanningIsAClearErrorNotAHang) {
  test::TempDir dir;
  const std::string data = random_bytes(1u << 20, 5);
  const fs::path file = write_file(dir.path() / "w.bin", data);
  for (const Mode& m : kModes) {
    SCOPED_TRACE(m.name);
    StagedReader reader({.use_io_uring = m.io_uring, .direct = m.direct});
    EXPECT_EQ(bytes_of(reader.take({file, 0, 1000}, {1000}, DType::U8)), data.substr(0, 1000));
    fs::resize_file(file, 300000);
    try {
      reader.prefetch({file, 200000, 500000});
      reader.take({file, 200000, 500000}, {500000}, DType::U8);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("the file ends at byte"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    }
    write_file(file, data);
  }
  EXPECT_THROW(StagedReader().take({dir.path() / "absent.bin", 0, 10}, {10}, DType::U8), Error);
}

TEST(StagedReader, AFilesystemRefusingODirectFallsBackToBufferedReadsWithOneWarning) {
  test::TempDir dir;
  const std::string data = random_bytes(50000, 6);
  const fs::path file = write_file(dir.path() / "w.bin", data);
  ScopedLogCapture log(LogLevel::Warning);
  StagedReader reader({.open_file = [](const char* p, int flags) {
    if (flags & O_DIRECT) {
      errno = EINVAL;  // what tmpfs used to answer, and FUSE mounts without direct_io do
      return -1;
    }
    return ::open(p, flags);
  }});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bytes_of(reader.take({file, 7, 40000}, {40000}, DType::U8)), data.substr(7, 40000));
  EXPECT_FALSE(reader.stats().direct);
  std::size_t warnings = 0;
  for (const std::string& text : log.messages()) warnings += text.find("refuses O_DIRECT") != std::string::npos;
  EXPECT_EQ(warnings, 1u);
}

TEST(StagedReader, WhenTheKernelRefusesAnIoUringItReadsWithPreadAndWarnsOnce) {
  // io_uring_setup refuses more than 32768 entries (EINVAL): the same path as a kernel without io_uring or a seccomp
  // filter that blocks it.
  test::TempDir dir;
  const std::string data = random_bytes(3u << 20, 7);
  const fs::path file = write_file(dir.path() / "w.bin", data);
  ScopedLogCapture log(LogLevel::Warning);
  StagedReader reader({.queue_depth = 1u << 20});
  EXPECT_FALSE(reader.stats().io_uring);
  for (int i = 0; i < 2; ++i) {
    reader.prefetch({file, 4097, (2u << 20) + 3});
    EXPECT_EQ(bytes_of(reader.take({file, 4097, (2u << 20) + 3}, {(2 << 20) + 3}, DType::U8)),
              data.substr(4097, (2u << 20) + 3));
  }
  std::size_t warnings = 0;
  for (const std::string& text : log.messages()) warnings += text.find("io_uring is not available") != std::string::npos;
  EXPECT_EQ(warnings, 1u);
}

}  // namespace
}  // namespace ferry::io
