// Temp-file-and-rename writes (see atomic_file.h).
#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "ferry/core/error.h"

namespace ferry::io::detail {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

void fsync_folder(const std::filesystem::path& folder) {
  int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some filesystems do not allow opening folders
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path path) : path_(std::move(path)) {
  static std::atomic<unsigned> counter{0};
  temp_ = path_.parent_path() / ("." + path_.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                                 std::to_string(counter.fetch_add(1)));
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error("cannot create file: " + errno_text(errno), temp_.string(),
                "check that the folder exists and is writable");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, std::min<std::size_t>(n, std::size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot write: " + errno_text(errno), path_.string(), "is the disk full?");
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void AtomicFile::commit(bool durable) {
  if (durable && ::fsync(fd_) != 0) throw Error("cannot fsync: " + errno_text(errno), path_.string());
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw Error("cannot close: " + errno_text(errno), path_.string());
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    throw Error("cannot rename " + temp_.filename().string() + " into place: " + errno_text(errno), path_.string());
  committed_ = true;
  if (durable) fsync_folder(path_.parent_path());
}

std::string read_small_file(const std::filesystem::path& path, std::size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw Error(error_kind_from_errno(err), "cannot open file: " + errno_text(err), path.string());
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("not a regular file", path.string());
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    throw Error("file of " + std::to_string(st.st_size) + " bytes is larger than the " + std::to_string(max_bytes) +
                    "-byte limit for this kind of file",
                path.string());
  }
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t r = ::read(fd, out.data() + got, out.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

}  // namespace ferry::io::detail
