// MappedFile: a read-only memory map of a whole file. Tensors viewing a checkpoint hold a shared_ptr to it,
// so the mapping lives exactly as long as some tensor still looks at it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

namespace ferry {

class MappedFile {
 public:
  /// Maps `path` read-only. Throws ferry::Error naming the file when it cannot be opened or mapped.
  /// An empty file maps to size() == 0 and data() == nullptr.
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  const std::filesystem::path& path() const noexcept { return path_; }

  /// Hints the kernel to read [offset, offset+len) ahead (MADV_WILLNEED). Best effort.
  void prefetch(std::size_t offset, std::size_t len) const noexcept;
  /// Reads [offset, offset+len) into memory and maps it, returning when done: what the first accesses would do
  /// (page faults, with the kernel's readahead), done ahead by whoever calls it, e.g. a prefetch thread
  /// (MADV_POPULATE_READ; on kernels before 5.14, a read of one byte per page). Best effort. Returns false, having
  /// done nothing, when 8 pages sampled over the range are already in the page cache.
  bool populate(std::size_t offset, std::size_t len) const noexcept;

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::filesystem::path path_;
};

}  // namespace ferry
