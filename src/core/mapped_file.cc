// Read-only mmap of a file (see include/ferry/core/mapped_file.h).
#include "ferry/core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ferry/core/error.h"

namespace ferry {

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    throw Error(error_kind_from_errno(err), std::string("cannot open file: ") + std::strerror(err), path.string(),
                err == ENOENT ? "check the path" : "check the file's permissions");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("not a regular file", path.string());
  }
  std::shared_ptr<MappedFile> f(new MappedFile);
  f->path_ = path;
  f->size_ = static_cast<std::size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw Error(std::string("cannot mmap file: ") + std::strerror(err), path.string());
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::prefetch(std::size_t offset, std::size_t len) const noexcept {
  if (!data_ || offset >= size_) return;
  long page = ::sysconf(_SC_PAGESIZE);
  std::size_t start = offset / page * page;
  std::size_t end = std::min(size_, offset + len);
  ::madvise(const_cast<uint8_t*>(data_) + start, end - start, MADV_WILLNEED);
}

bool MappedFile::populate(std::size_t offset, std::size_t len) const noexcept {
  if (!data_ || offset >= size_) return false;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t start = offset / page * page, end = std::min(size_, offset + len);
  // Already in the page cache (a warm forward): nothing to read, and walking every page would only take CPU from the
  // threads computing meanwhile (1-2 % of a decode step when done for every page). Eight pages spread over the
  // range decide: the kernel reads and evicts files in runs, so a range with its samples resident is resident, and
  // a page missed anyway is read by its first access, as without a prefetch.
  const std::size_t pages = (end - start + page - 1) / page;
  bool resident = true;
  for (std::size_t i = 0; i < 8 && resident; ++i) {
    unsigned char in = 0;
    const std::size_t at = start + (pages - 1) * i / 7 * page;
    resident = ::mincore(const_cast<uint8_t*>(data_) + at, 1, &in) == 0 && (in & 1);
  }
  if (resident) return false;
#ifndef MADV_POPULATE_READ
  constexpr int MADV_POPULATE_READ = 22;  // Linux 5.14
#endif
  if (::madvise(const_cast<uint8_t*>(data_) + start, end - start, MADV_POPULATE_READ) == 0) return true;
  if (errno != EINVAL) return true;  // e.g. EFAULT past the end of a truncated file: nothing more to do
  uint8_t sink = 0;
  for (std::size_t i = start; i < end; i += page) sink ^= *reinterpret_cast<const volatile uint8_t*>(data_ + i);
  (void)sink;
  return true;
}

}  // namespace ferry
