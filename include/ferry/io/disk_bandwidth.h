// The disk's O_DIRECT read bandwidth: what reading offloaded weights can reach at best, so a run can say how close it
// came (issue 41), and the request size and queue depth the StagedReader should use there. Measured once per block
// device and cached (`ferry bench --disk` measures again on demand).
//
// A measurement reads existing files (a model's shards) with O_DIRECT through io_uring over a grid of request
// sizes × queue depths, each point from another region of the files when they are large enough, so neither the
// page cache nor the device's own cache serves it. The best point is the bound.
//
//   auto bw = io::measure_disk_bandwidth({"model/model-00001-of-00002.safetensors"});
//   io::save_disk_bandwidth(bw);                       // ~/.cache/ferry/disk-bandwidth.json, keyed by device
//   auto cached = io::cached_disk_bandwidth("model");  // later runs on the same device
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::io {

struct DiskReadPoint {
  std::size_t request_bytes = 0;  ///< one read's size
  unsigned queue_depth = 0;       ///< reads in flight at once
  double gb_per_s = 0;            ///< 10^9 bytes per second
};

struct DiskBandwidth {
  std::string device;               ///< the block device, "vda (254:0)" (device_of)
  std::vector<DiskReadPoint> grid;  ///< every point measured
  DiskReadPoint best;               ///< the fastest: the bound
  std::string measured_at;          ///< UTC, ISO 8601
  std::size_t bytes_per_point = 0;  ///< bytes read for each point
};

struct DiskBandwidthOptions {
  std::vector<std::size_t> request_bytes{256 << 10, 1 << 20, 4 << 20, 16 << 20};  // ascending
  std::vector<unsigned> queue_depths{1, 4, 16, 64};
  /// Bytes read per point (less when the files are smaller).
  std::size_t bytes_per_point = std::size_t{128} << 20;
  /// Points whose request size × queue depth exceeds this are skipped (that much buffer memory is allocated).
  std::size_t max_in_flight_bytes = std::size_t{256} << 20;
};

/// Reads `files` with O_DIRECT over the options' grid. Throws ferry::Error naming the file when one cannot be opened
/// with O_DIRECT (a filesystem that refuses it has no such bound), when the files hold less than 16 MiB, or on a
/// read error.
DiskBandwidth measure_disk_bandwidth(const std::vector<std::filesystem::path>& files,
                                     const DiskBandwidthOptions& options = {});

/// The block device holding `path`: "name (major:minor)" from /sys/dev/block (the whole disk's name when the path is
/// on a partition); "major:minor" alone when sysfs does not say.
std::string device_of(const std::filesystem::path& path);

/// The cache file: $XDG_CACHE_HOME/ferry/disk-bandwidth.json (else ~/.cache/ferry/...).
std::filesystem::path disk_bandwidth_cache_file();
/// The cached measurement of the device holding `path`, if any (a cache that cannot be read counts as none).
std::optional<DiskBandwidth> cached_disk_bandwidth(const std::filesystem::path& path);
/// The entry for `device` in the cache file's text; nullopt when it is absent or malformed (any field missing, of
/// the wrong type, or a point the reader cannot use: a request that is not whole 4096-byte blocks up to 1 GiB, a
/// queue depth outside 1..4096, a speed that is not a positive number). Never throws.
std::optional<DiskBandwidth> parse_disk_bandwidth_cache(std::string_view text, const std::string& device) noexcept;
/// Stores `bw` in the cache under its device, replacing an older one (atomically; a failure is logged, not thrown).
void save_disk_bandwidth(const DiskBandwidth& bw);

/// The point the StagedReader should read with: the fastest whose request size is at most `max_request`, unless the
/// reader's default (1 MiB × 16) is within 10% of it (one pass per point is noisy); the best overall when no point
/// is that small.
DiskReadPoint best_read_point(const DiskBandwidth& bw, std::size_t max_request = std::size_t{4} << 20);

}  // namespace ferry::io
