// measure_disk_bandwidth and its cache (see include/ferry/io/disk_bandwidth.h).
#include "ferry/io/disk_bandwidth.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"

namespace ferry::io {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kBlock = 4096;  // O_DIRECT's alignment
// StagedReaderOptions' defaults: 1 MiB reads, 16 in flight.
constexpr std::size_t kUsualRequest = std::size_t{1} << 20;
constexpr unsigned kUsualDepth = 16;

struct OpenFile {
  int fd = -1;
  std::size_t size = 0;  // whole blocks only
  fs::path path;
};

struct Fds {
  std::vector<OpenFile> files;
  ~Fds() {
    for (auto& f : files)
      if (f.fd >= 0) ::close(f.fd);
  }
};

struct AlignedFree {
  void operator()(void* p) const noexcept { std::free(p); }
};

// Reads `total` bytes in `request`-sized reads, `depth` in flight, starting `start` bytes into the files taken end to
// end (wrapping around). Returns the seconds it took.
double read_point(io_uring& ring, const std::vector<OpenFile>& files, std::size_t files_bytes, std::size_t start,
                  std::size_t total, std::size_t request, unsigned depth, char* buffers) {
  std::size_t issued = 0, done = 0;
  std::size_t pos = start % files_bytes;
  unsigned in_flight = 0;
  std::vector<unsigned> free_slots;
  for (unsigned i = 0; i < depth; ++i) free_slots.push_back(i);
  const auto t0 = std::chrono::steady_clock::now();
  while (done < total) {
    while (in_flight < depth && issued < total) {
      // The file and offset of `pos`, a read that stays inside that file.
      std::size_t at = pos, k = 0;
      while (at >= files[k].size) at -= files[k].size, ++k;
      const std::size_t n = std::min({request, files[k].size - at, total - issued});
      const std::size_t len = (n + kBlock - 1) / kBlock * kBlock;
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (!sqe) break;
      const unsigned slot = free_slots.back();
      free_slots.pop_back();
      io_uring_prep_read(sqe, files[k].fd, buffers + static_cast<std::size_t>(slot) * request,
                         static_cast<unsigned>(std::min(len, request)), at);
      io_uring_sqe_set_data(sqe, reinterpret_cast<void*>(static_cast<std::uintptr_t>(slot) + 1));
      issued += n;
      pos = (pos + n) % files_bytes;
      ++in_flight;
    }
    const int submitted = io_uring_submit(&ring);
    if (submitted < 0)
      throw Error(std::string("io_uring_submit failed: ") + std::strerror(-submitted), "disk bandwidth");
    io_uring_cqe* cqe = nullptr;
    const int rc = io_uring_wait_cqe(&ring, &cqe);
    if (rc < 0) throw Error(std::string("io_uring_wait_cqe failed: ") + std::strerror(-rc), "disk bandwidth");
    do {
      if (cqe->res < 0) {
        const int err = -cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        throw Error(std::string("an O_DIRECT read failed: ") + std::strerror(err), "disk bandwidth");
      }
      done += static_cast<std::size_t>(cqe->res);
      if (cqe->res == 0) done = total;  // end of a file: nothing more to learn
      free_slots.push_back(static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(io_uring_cqe_get_data(cqe)) - 1));
      --in_flight;
      io_uring_cqe_seen(&ring, cqe);
    } while (io_uring_peek_cqe(&ring, &cqe) == 0);
  }
  while (in_flight > 0) {  // reads past `total` (rounding): wait for them before the buffers are reused
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring, &cqe) < 0) break;
    io_uring_cqe_seen(&ring, cqe);
    --in_flight;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json to_json(const DiskReadPoint& p) {
  return {{"request_bytes", p.request_bytes}, {"queue_depth", p.queue_depth}, {"gb_per_s", p.gb_per_s}};
}

}  // namespace

DiskBandwidth measure_disk_bandwidth(const std::vector<fs::path>& files, const DiskBandwidthOptions& options) {
  if (files.empty()) throw Error("no file to measure the disk's read bandwidth on", "disk bandwidth");
  Fds fds;
  std::size_t files_bytes = 0;
  for (const auto& path : files) {
    OpenFile f;
    f.path = path;
    f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (f.fd < 0)
      throw Error(std::string("cannot open with O_DIRECT: ") + std::strerror(errno), path.string(),
                  "measure on a file of a filesystem that allows direct reads (not tmpfs)");
    struct stat st {};
    ::fstat(f.fd, &st);
    f.size = static_cast<std::size_t>(st.st_size) / kBlock * kBlock;
    files_bytes += f.size;
    fds.files.push_back(f);
  }
  std::erase_if(fds.files, [](const OpenFile& f) {
    if (f.size == 0) ::close(f.fd);
    return f.size == 0;
  });
  if (files_bytes < (std::size_t{16} << 20))
    throw Error(fmt::format("{} bytes of files is too little to measure a disk's read bandwidth (16 MiB at least)",
                            files_bytes),
                files.front().string(), "measure on a model's shards, or a folder holding a large file");
  // The grid's points within the in-flight limit, and the buffer memory the largest needs.
  std::vector<std::pair<std::size_t, unsigned>> points;
  std::size_t buffer_bytes = 0;
  unsigned max_depth = 1;
  for (std::size_t request : options.request_bytes)
    for (unsigned depth : options.queue_depths)
      if (request > 0 && request % kBlock == 0 && depth > 0 && request * depth <= options.max_in_flight_bytes) {
        points.emplace_back(request, depth);
        buffer_bytes = std::max(buffer_bytes, request * depth);
        max_depth = std::max(max_depth, depth);
      }
  if (points.empty())
    throw Error("no point of the grid is a whole number of 4096-byte blocks within the in-flight limit",
                "disk bandwidth");
  void* raw = nullptr;
  if (::posix_memalign(&raw, kBlock, buffer_bytes) != 0)
    throw Error(ErrorKind::OutOfMemory, "no memory for the measurement's read buffers", "disk bandwidth");
  std::unique_ptr<void, AlignedFree> buffers(raw);
  io_uring ring{};
  if (const int rc = io_uring_queue_init(std::max(max_depth, 8u), &ring, 0); rc < 0)
    throw Error(std::string("io_uring is not available: ") + std::strerror(-rc), "disk bandwidth");
  struct RingExit {
    io_uring* r;
    ~RingExit() { io_uring_queue_exit(r); }
  } ring_exit{&ring};

  DiskBandwidth out;
  out.device = device_of(fds.files.front().path);
  out.measured_at = utc_now();
  out.bytes_per_point = std::min(options.bytes_per_point, files_bytes) / kBlock * kBlock;
  // Each point starts where the last ended, so it reads bytes the device did not just serve (when the files are large
  // enough).
  std::size_t start = 0;
  for (const auto& [request, depth] : points) {
    const double s = read_point(ring, fds.files, files_bytes, start, out.bytes_per_point, request, depth,
                                static_cast<char*>(buffers.get()));
    start += out.bytes_per_point;
    DiskReadPoint p{request, depth, s > 0 ? static_cast<double>(out.bytes_per_point) / s / 1e9 : 0};
    out.grid.push_back(p);
    if (p.gb_per_s > out.best.gb_per_s) out.best = p;
  }
  return out;
}

std::string device_of(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "unknown";
  const std::string id = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  std::error_code ec;
  fs::path sys = fs::canonical("/sys/dev/block/" + id, ec);
  if (ec) return id;
  // A partition's folder sits inside its disk's: name the disk.
  if (fs::exists(sys / "partition", ec)) sys = sys.parent_path();
  return sys.filename().string() + " (" + id + ")";
}

fs::path disk_bandwidth_cache_file() {
  fs::path dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = fs::path(x) / "ferry";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = fs::path(h) / ".cache" / "ferry";
  else dir = fs::temp_directory_path() / "ferry";
  return dir / "disk-bandwidth.json";
}

namespace {

nlohmann::json read_cache() {
  const fs::path file = disk_bandwidth_cache_file();
  std::error_code ec;
  if (!fs::exists(file, ec)) return nlohmann::json::object();
  try {
    nlohmann::json j = nlohmann::json::parse(detail::read_small_file(file, 1 << 20));
    if (j.is_object()) return j;
  } catch (const std::exception& e) {
    log_warning("{}: unreadable ({}); the disk bandwidth will be measured again", file.string(), e.what());
  }
  return nlohmann::json::object();
}

}  // namespace

namespace {

// A point the reader can use: a request of whole blocks up to 1 GiB, 1..4096 in flight, a finite positive speed.
std::optional<DiskReadPoint> valid_point(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  const auto r = j.find("request_bytes"), q = j.find("queue_depth"), g = j.find("gb_per_s");
  if (r == j.end() || q == j.end() || g == j.end() || !r->is_number_unsigned() || !q->is_number_unsigned() ||
      !g->is_number())
    return std::nullopt;
  const auto request = r->get<std::uint64_t>(), depth = q->get<std::uint64_t>();
  const double gbps = g->get<double>();
  if (request == 0 || request % kBlock != 0 || request > (std::uint64_t{1} << 30) || depth == 0 || depth > 4096 ||
      !std::isfinite(gbps) || gbps <= 0)
    return std::nullopt;
  return DiskReadPoint{static_cast<std::size_t>(request), static_cast<unsigned>(depth), gbps};
}

}  // namespace

std::optional<DiskBandwidth> parse_disk_bandwidth_cache(std::string_view text, const std::string& device) noexcept {
  try {
    const nlohmann::json cache = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!cache.is_object()) return std::nullopt;
    const auto it = cache.find(device);
    if (it == cache.end() || !it->is_object()) return std::nullopt;
    const nlohmann::json& j = *it;
    DiskBandwidth bw;
    bw.device = device;
    if (const auto m = j.find("measured_at"); m != j.end() && m->is_string()) bw.measured_at = m->get<std::string>();
    if (const auto b = j.find("bytes_per_point"); b != j.end() && b->is_number_unsigned())
      bw.bytes_per_point = b->get<std::size_t>();
    const auto best = j.find("best");
    if (best == j.end()) return std::nullopt;
    const auto point = valid_point(*best);
    if (!point) return std::nullopt;
    bw.best = *point;
    if (const auto g = j.find("grid"); g != j.end() && g->is_array())
      for (const auto& p : *g)
        if (const auto q = valid_point(p)) bw.grid.push_back(*q);
    if (bw.grid.empty()) bw.grid.push_back(bw.best);
    return bw;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<DiskBandwidth> cached_disk_bandwidth(const fs::path& path) {
  const fs::path file = disk_bandwidth_cache_file();
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  try {
    return parse_disk_bandwidth_cache(detail::read_small_file(file, 1 << 20), device_of(path));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void save_disk_bandwidth(const DiskBandwidth& bw) {
  const fs::path file = disk_bandwidth_cache_file();
  try {
    nlohmann::json cache = read_cache();
    nlohmann::json grid = nlohmann::json::array();
    for (const auto& p : bw.grid) grid.push_back(to_json(p));
    cache[bw.device] = {{"measured_at", bw.measured_at},
                        {"bytes_per_point", bw.bytes_per_point},
                        {"best", to_json(bw.best)},
                        {"grid", grid}};
    fs::create_directories(file.parent_path());
    detail::AtomicFile out(file);
    out.write(cache.dump(2) + "\n");
    out.commit(/*durable=*/false);
  } catch (const std::exception& e) {
    log_warning("could not cache the disk bandwidth in {}: {}", file.string(), e.what());
  }
}

DiskReadPoint best_read_point(const DiskBandwidth& bw, std::size_t max_request) {
  DiskReadPoint best, usual;
  for (const auto& p : bw.grid) {
    if (p.request_bytes <= max_request && p.gb_per_s > best.gb_per_s) best = p;
    if (p.request_bytes == kUsualRequest && p.queue_depth == kUsualDepth) usual = p;
  }
  if (best.gb_per_s <= 0) return bw.best;
  // One pass per point on a shared disk is noisy: the reader's usual point stays unless another beat it clearly.
  return usual.gb_per_s > 0 && usual.gb_per_s * 1.1 >= best.gb_per_s ? usual : best;
}

}  // namespace ferry::io
