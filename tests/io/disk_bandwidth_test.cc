// measure_disk_bandwidth over a small grid, the per-device cache, and its parser's answers to malformed entries.
#include "ferry/io/disk_bandwidth.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "io_test_util.h"

namespace ferry::io {
namespace {

using iotest::TempDir;

void write_file(const std::filesystem::path& path, std::size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  std::string block(1 << 20, '\x5a');
  for (std::size_t done = 0; done < bytes; done += block.size())
    out.write(block.data(), static_cast<std::streamsize>(std::min(block.size(), bytes - done)));
}

// Points the cache at a folder of the test's for its lifetime.
struct CacheHome {
  TempDir dir;
  std::string old;
  bool had = false;
  CacheHome() {
    if (const char* x = std::getenv("XDG_CACHE_HOME")) old = x, had = true;
    ::setenv("XDG_CACHE_HOME", dir.path().c_str(), 1);
  }
  ~CacheHome() {
    if (had) ::setenv("XDG_CACHE_HOME", old.c_str(), 1);
    else ::unsetenv("XDG_CACHE_HOME");
  }
};

TEST(DiskBandwidth, MeasuresEveryPointOfTheGridAndKeepsTheFastest) {
  TempDir dir;
  write_file(dir / "a.bin", 20 << 20);
  write_file(dir / "b.bin", (4 << 20) + 12345);  // a tail under one block is not read
  DiskBandwidthOptions o;
  o.request_bytes = {64 << 10, 1 << 20};
  o.queue_depths = {1, 8};
  o.bytes_per_point = 8 << 20;
  DiskBandwidth bw;
  try {
    bw = measure_disk_bandwidth({dir / "a.bin", dir / "b.bin"}, o);
  } catch (const Error& e) {
    if (e.problem().find("cannot open with O_DIRECT") != std::string::npos)
      GTEST_SKIP() << "this filesystem refuses O_DIRECT: " << e.what();
    throw;
  }
  ASSERT_EQ(bw.grid.size(), 4u);
  EXPECT_EQ(bw.bytes_per_point, std::size_t{8} << 20);
  double fastest = 0;
  for (const auto& p : bw.grid) {
    EXPECT_GT(p.gb_per_s, 0) << p.request_bytes << " x " << p.queue_depth;
    fastest = std::max(fastest, p.gb_per_s);
  }
  EXPECT_EQ(bw.best.gb_per_s, fastest);
  EXPECT_EQ(bw.grid[0].request_bytes, std::size_t{64} << 10);
  EXPECT_EQ(bw.grid[1].queue_depth, 8u);
  EXPECT_FALSE(bw.device.empty());
  EXPECT_EQ(bw.device, device_of(dir / "a.bin"));
  EXPECT_EQ(bw.measured_at.size(), 20u) << bw.measured_at;  // 2026-12-05T08:00:00Z
}

TEST(DiskBandwidth, RefusesWhatItCannotMeasure) {
  TempDir dir;
  write_file(dir / "small.bin", 1 << 20);
  try {
    measure_disk_bandwidth({dir / "small.bin"});
    ADD_FAILURE() << "1 MiB measured";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("too little") != std::string::npos || what.find("O_DIRECT") != std::string::npos) << what;
  }
  try {
    measure_disk_bandwidth({dir / "missing.bin"});
    ADD_FAILURE() << "a missing file measured";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.bin"), std::string::npos) << e.what();
  }
  EXPECT_THROW(measure_disk_bandwidth({}), Error);
}

TEST(DiskBandwidth, TheCacheKeepsOneEntryPerDevice) {
  CacheHome home;
  TempDir dir;
  write_file(dir / "w.bin", 4096);
  EXPECT_EQ(cached_disk_bandwidth(dir / "w.bin"), std::nullopt);  // nothing measured yet
  DiskBandwidth bw;
  bw.device = device_of(dir / "w.bin");
  bw.measured_at = "2026-12-05T08:00:00Z";
  bw.bytes_per_point = 1 << 20;
  bw.grid = {{256 << 10, 1, 0.5}, {1 << 20, 16, 2.0}, {16 << 20, 64, 2.5}};
  bw.best = bw.grid[2];
  save_disk_bandwidth(bw);
  DiskBandwidth other = bw;
  other.device = "another (1:2)";
  other.best.gb_per_s = 9;
  save_disk_bandwidth(other);
  EXPECT_TRUE(std::filesystem::exists(home.dir.path() / "ferry" / "disk-bandwidth.json"));
  const auto back = cached_disk_bandwidth(dir / "w.bin");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->device, bw.device);
  EXPECT_EQ(back->best.gb_per_s, 2.5);
  EXPECT_EQ(back->grid.size(), 3u);
  EXPECT_EQ(back->measured_at, bw.measured_at);
  // The reader's requests stay at most 4 MiB: the fastest of those (here the default, 1 MiB x 16).
  EXPECT_EQ(best_read_point(*back).request_bytes, std::size_t{1} << 20);
  EXPECT_EQ(best_read_point(*back, std::size_t{64} << 20).request_bytes, std::size_t{16} << 20);
  // The default stays unless another point beats it by more than 10%.
  DiskBandwidth close = bw;
  close.grid = {{1 << 20, 16, 2.0}, {4 << 20, 4, 2.15}};
  EXPECT_EQ(best_read_point(close).request_bytes, std::size_t{1} << 20);
  close.grid[1].gb_per_s = 2.5;
  EXPECT_EQ(best_read_point(close).request_bytes, std::size_t{4} << 20);
  EXPECT_EQ(best_read_point(close).queue_depth, 4u);
  // An unreadable cache is no cache.
  std::ofstream(home.dir.path() / "ferry" / "disk-bandwidth.json") << "{not json";
  EXPECT_EQ(cached_disk_bandwidth(dir / "w.bin"), std::nullopt);
  save_disk_bandwidth(bw);  // and is replaced by the next measurement
  EXPECT_TRUE(cached_disk_bandwidth(dir / "w.bin").has_value());
}

TEST(DiskBandwidth, MalformedCacheEntriesAreIgnored) {
  const std::string device = "vda (254:0)";
  auto entry = [&](const std::string& best) {
    return "{\"" + device + "\": {\"measured_at\": \"x\", \"best\": " + best + "}}";
  };
  const std::string good = R"({"request_bytes": 1048576, "queue_depth": 16, "gb_per_s": 1.5})";
  ASSERT_TRUE(parse_disk_bandwidth_cache(entry(good), device).has_value());
  EXPECT_EQ(parse_disk_bandwidth_cache(entry(good), device)->grid.size(), 1u);  // the best alone
  EXPECT_EQ(parse_disk_bandwidth_cache(entry(good), "sdb (8:16)"), std::nullopt);
  for (const std::string& bad : std::vector<std::string>{
           "",
           "[]",
           "{\"" + device + "\": 3}",
           entry("null"),
           entry(R"({"request_bytes": 1048576, "queue_depth": 16})"),
           entry(R"({"request_bytes": 1000, "queue_depth": 16, "gb_per_s": 1.5})"),
           entry(R"({"request_bytes": 0, "queue_depth": 16, "gb_per_s": 1.5})"),
           entry(R"({"request_bytes": 2147483648, "queue_depth": 16, "gb_per_s": 1.5})"),
           entry(R"({"request_bytes": 1048576, "queue_depth": 0, "gb_per_s": 1.5})"),
           entry(R"({"request_bytes": 1048576, "queue_depth": 100000, "gb_per_s": 1.5})"),
           entry(R"({"request_bytes": 1048576, "queue_depth": -4, "gb_per_s": 1.5})"),
           entry(R"({"request_bytes": 1048576, "queue_depth": 16, "gb_per_s": -1})"),
           entry(R"({"request_bytes": 1048576, "queue_depth": 16, "gb_per_s": "fast"})"),
           entry(R"({"request_bytes": 1048576.5, "queue_depth": 16, "gb_per_s": 1})"),
       })
    EXPECT_EQ(parse_disk_bandwidth_cache(bad, device), std::nullopt) << bad;
  // Grid points the reader cannot use are dropped; the entry stays.
  const auto mixed = parse_disk_bandwidth_cache("{\"" + device + "\": {\"best\": " + good +
                                                    R"(, "grid": [{"request_bytes": 3}, )" + good + "]}}",
                                                device);
  ASSERT_TRUE(mixed.has_value());
  EXPECT_EQ(mixed->grid.size(), 1u);
}

}  // namespace
}  // namespace ferry::io
