// Zip central-directory reader for data offsets (see zip_directory.h). Record layouts: PKWARE APPNOTE.TXT 4.3.
#include "io/zip_directory.h"

#include <algorithm>

#include "ferry/core/error.h"

namespace ferry::io::detail {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kEnd64LocatorSig = 0x07064b50, kEnd64Sig = 0x06064b50;
constexpr std::size_t kLocalSize = 30, kCentralSize = 46, kEndSize = 22, kLocatorSize = 20, kEnd64Size = 56;

// Little-endian reads at a checked position.
class Reader {
 public:
  Reader(const uint8_t* data, std::size_t size, const std::string& where) : d_(data), n_(size), where_(where) {}
  void need(uint64_t pos, uint64_t len, const char* what) const {
    if (pos > n_ || len > n_ - pos)
      throw Error(std::string("zip ") + what + " at byte " + std::to_string(pos) + " lies outside the file (" +
                      std::to_string(n_) + " bytes)",
                  where_, "the file is truncated or corrupt");
  }
  uint64_t le(uint64_t pos, int bytes) const {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | d_[pos + i];
    return v;
  }
  uint16_t u16(uint64_t pos) const { return static_cast<uint16_t>(le(pos, 2)); }
  uint32_t u32(uint64_t pos) const { return static_cast<uint32_t>(le(pos, 4)); }
  uint64_t u64(uint64_t pos) const { return le(pos, 8); }
  const uint8_t* at(uint64_t pos) const { return d_ + pos; }
  std::size_t size() const { return n_; }
  const std::string& where() const { return where_; }

 private:
  const uint8_t* d_;
  std::size_t n_;
  const std::string& where_;
};

struct Directory {
  uint64_t entries = 0, offset = 0, size = 0;
};

Directory find_directory(const Reader& r) {
  if (r.size() < kEndSize) throw Error("file is too small to be a zip archive", r.where());
  // The end record sits in the last 22 + 65535 bytes (its comment is at most 65535 bytes long).
  const std::size_t lowest = r.size() > kEndSize + 65535 ? r.size() - kEndSize - 65535 : 0;
  std::size_t pos = r.size() - kEndSize;
  for (;; --pos) {
    if (r.u32(pos) == kEndSig && pos + kEndSize + r.u16(pos + 20) <= r.size()) break;
    if (pos == lowest) throw Error("no zip end-of-central-directory record", r.where(), "the file is not a zip archive");
  }
  Directory dir{r.u16(pos + 10), r.u32(pos + 16), r.u32(pos + 12)};
  if (r.u16(pos + 4) != 0 && r.u16(pos + 4) != 0xFFFF)
    throw Error("multi-disk zip archives are not supported", r.where());
  const bool zip64 = dir.entries == 0xFFFF || dir.offset == 0xFFFFFFFF || dir.size == 0xFFFFFFFF;
  if (pos >= kLocatorSize && r.u32(pos - kLocatorSize) == kEnd64LocatorSig) {
    const uint64_t end64 = r.u64(pos - kLocatorSize + 8);
    r.need(end64, kEnd64Size, "ZIP64 end record");
    if (r.u32(end64) != kEnd64Sig) throw Error("ZIP64 end record has a bad signature", r.where());
    dir = {r.u64(end64 + 32), r.u64(end64 + 48), r.u64(end64 + 40)};
  } else if (zip64) {
    throw Error("zip archive needs a ZIP64 end record but has none", r.where(), "the file is corrupt");
  }
  r.need(dir.offset, dir.size, "central directory");
  if (dir.entries > dir.size / kCentralSize)
    throw Error("zip directory claims " + std::to_string(dir.entries) + " entries in " + std::to_string(dir.size) +
                    " bytes",
                r.where(), "the file is corrupt");
  return dir;
}

// Applies the ZIP64 extended-information extra field (id 0x0001) to the fields that were saturated.
void apply_zip64_extra(const Reader& r, uint64_t extra, uint64_t extra_len, ZipEntry& e, bool size_sat,
                       bool csize_sat, bool offset_sat) {
  uint64_t p = extra;
  const uint64_t end = extra + extra_len;
  while (p + 4 <= end) {
    const uint16_t id = r.u16(p), len = r.u16(p + 2);
    if (p + 4 + len > end) break;
    if (id == 0x0001) {
      uint64_t q = p + 4;
      auto take = [&](uint64_t& field) {
        if (q + 8 > p + 4 + len) throw Error("ZIP64 extra field is too short", r.where() + ": " + e.name);
        field = r.u64(q);
        q += 8;
      };
      if (size_sat) take(e.size);
      if (csize_sat) take(e.compressed_size);
      if (offset_sat) take(e.local_header_offset);
      return;
    }
    p += 4 + len;
  }
  if (size_sat || csize_sat || offset_sat)
    throw Error("zip entry needs a ZIP64 extra field but has none", r.where() + ": " + e.name);
}

}  // namespace

std::vector<ZipEntry> read_zip_directory(const uint8_t* data, std::size_t size, const std::string& where) {
  const Reader r(data, size, where);
  const Directory dir = find_directory(r);
  std::vector<ZipEntry> entries;
  entries.reserve(static_cast<std::size_t>(dir.entries));
  uint64_t p = dir.offset;
  const uint64_t dir_end = dir.offset + dir.size;
  for (uint64_t i = 0; i < dir.entries; ++i) {
    if (p + kCentralSize > dir_end) throw Error("zip central directory is truncated", where);
    if (r.u32(p) != kCentralSig) throw Error("zip central directory entry has a bad signature", where);
    ZipEntry e;
    e.flags = r.u16(p + 8);
    e.method = r.u16(p + 10);
    e.crc32 = r.u32(p + 16);
    e.compressed_size = r.u32(p + 20);
    e.size = r.u32(p + 24);
    const uint64_t name_len = r.u16(p + 28), extra_len = r.u16(p + 30), comment_len = r.u16(p + 32);
    e.local_header_offset = r.u32(p + 42);
    const uint64_t next = p + kCentralSize + name_len + extra_len + comment_len;
    if (next > dir_end) throw Error("zip central directory entry runs past the directory", where);
    e.name.assign(reinterpret_cast<const char*>(r.at(p + kCentralSize)), name_len);
    apply_zip64_extra(r, p + kCentralSize + name_len, extra_len, e, e.size == 0xFFFFFFFF,
                      e.compressed_size == 0xFFFFFFFF, e.local_header_offset == 0xFFFFFFFF);

    // The local header repeats the name and has its own extra field (PyTorch's alignment padding lives there).
    r.need(e.local_header_offset, kLocalSize, "local header");
    const uint64_t lh = e.local_header_offset;
    if (r.u32(lh) != kLocalSig) throw Error("zip local header has a bad signature", where + ": " + e.name);
    const uint64_t lname = r.u16(lh + 26), lextra = r.u16(lh + 28);
    r.need(lh + kLocalSize, lname + lextra, "local header name");
    if (lname != name_len || !std::equal(e.name.begin(), e.name.end(), r.at(lh + kLocalSize)))
      throw Error("zip local header names a different file than the central directory", where + ": " + e.name);
    e.data_offset = lh + kLocalSize + lname + lextra;
    if (e.data_offset > dir.offset || e.compressed_size > dir.offset - e.data_offset)
      throw Error("zip entry data (" + std::to_string(e.compressed_size) + " bytes at " +
                      std::to_string(e.data_offset) + ") runs into the central directory",
                  where + ": " + e.name, "the file is truncated or corrupt");
    entries.push_back(std::move(e));
    p = next;
  }
  return entries;
}

}  // namespace ferry::io::detail
