// AtomicFile: write a file under a temporary name in the same folder, then rename it into place, so readers see
// either the old file or the complete new one — never a torn one. With durable = true the bytes are fsync'd before
// the rename and the folder after it, so the same holds after a crash or power loss. Internal to ferry_io.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string_view>

namespace ferry::io::detail {

class AtomicFile {
 public:
  /// Creates the temporary file ".<name>.tmp-<pid>-<n>" next to `path`. Throws ferry::Error naming `path`.
  explicit AtomicFile(std::filesystem::path path);
  /// Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  /// Flushes (fsync when durable), closes and renames onto the final path (then fsyncs the folder when durable).
  void commit(bool durable);

  const std::filesystem::path& path() const noexcept { return path_; }
  const std::filesystem::path& temp_path() const noexcept { return temp_; }

 private:
  std::filesystem::path path_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

/// Reads a whole (small) file into a string. Throws ferry::Error naming the file; refuses files over `max_bytes`.
std::string read_small_file(const std::filesystem::path& path, std::size_t max_bytes);

}  // namespace ferry::io::detail
