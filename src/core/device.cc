// Device parsing and printing (see include/ferry/core/device.h).
#include "ferry/core/device.h"

#include <charconv>

#include "ferry/core/error.h"

namespace ferry {
namespace {

bool parse_index(std::string_view s, int& out) {
  if (s.empty() || s.size() > 6) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && out >= 0;
}

[[noreturn]] void bad(std::string_view s) {
  throw Error("invalid device '" + std::string(s) + "'", "",
              "use cpu, meta, disk, cuda:N, a GPU index N, or virt:N (virtual test devices)");
}

}  // namespace

Device Device::parse(std::string_view s) {
  if (s.rfind("rank", 0) == 0) {  // rankR:<device>
    const std::size_t colon = s.find(':');
    int r = 0;
    if (colon == std::string_view::npos || !parse_index(s.substr(4, colon - 4), r) || r > 1000000) bad(s);
    const Device d = parse(s.substr(colon + 1));
    if (d.rank != 0) bad(s);
    return d.on_rank(r);
  }
  if (s == "cpu") return cpu();
  if (s == "meta") return meta();
  if (s == "disk") return disk();
  if (s == "cuda") return cuda(0);
  int i = 0;
  if (parse_index(s, i)) return cuda(i);
  if (s.rfind("cuda:", 0) == 0) {
    if (!parse_index(s.substr(5), i)) bad(s);
    return cuda(i);
  }
  if (s.rfind("virt:", 0) == 0) {
    if (!parse_index(s.substr(5), i)) bad(s);
    return virt(i);
  }
  bad(s);
}

std::string Device::str() const {
  if (rank != 0) return "rank" + std::to_string(rank) + ":" + local().str();
  switch (kind) {
    case Kind::CPU: return "cpu";
    case Kind::Meta: return "meta";
    case Kind::Disk: return "disk";
    case Kind::CUDA: return "cuda:" + std::to_string(index);
    case Kind::Virtual: return "virt:" + std::to_string(index);
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace ferry
