// Zip central directory, read straight from the file's bytes, to learn where each stored entry's data begins.
//
// libzip (used for everything else: opening, consistency checks, inflating) does not expose an entry's data offset,
// and zero-copy tensors need it: for an uncompressed (stored) entry the data is the local header's offset + 30 +
// name length + extra length (PyTorch pads the extra field so data starts at a multiple of 64). ZIP64 is handled
// (PyTorch writes it for checkpoints over 4 GiB). Every offset is bounds-checked; nothing here trusts the file.
// Internal to ferry_io.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ferry::io::detail {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;             // 0 = stored, 8 = deflate, ...
  uint16_t flags = 0;              // bit 0: encrypted
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;
  uint64_t local_header_offset = 0;
  uint64_t data_offset = 0;        // first byte of the entry's (possibly compressed) data
};

/// Parses the end-of-central-directory record (and the ZIP64 one when present), the central directory and each
/// entry's local header. Throws ferry::Error(where) on any inconsistency: truncated records, offsets outside the
/// file, a local header whose name differs from the directory's, data running past the central directory.
std::vector<ZipEntry> read_zip_directory(const uint8_t* data, std::size_t size, const std::string& where);

}  // namespace ferry::io::detail
