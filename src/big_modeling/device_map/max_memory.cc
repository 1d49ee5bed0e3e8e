// Memory budgets: Accelerate's size strings (convert_file_size_to_int), the ordered MaxMemory and
// get_max_memory (free accelerator memory + the CPU's MemAvailable). See include/ferry/big_modeling/max_memory.h.
#include "ferry/big_modeling/max_memory.h"

#include <cstdint>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"

namespace ferry {
namespace {

constexpr const char* kSizeHint =
    "use an integer number of bytes, or a number with a unit like '5.0GB' (10^9 bytes), '5GiB' (2^30), '500MB', "
    "'1.5GiB'";

[[noreturn]] void bad_size(std::string_view size) {
  throw Error(fmt::format("size '{}' is not in a valid format", size), "", kSizeHint);
}

bool ends_with_ci(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  for (std::size_t i = 0; i < suffix.size(); ++i)
    if (std::toupper(static_cast<unsigned char>(s[s.size() - suffix.size() + i])) != suffix[i]) return false;
  return true;
}

// Python's float(text): optional surrounding blanks, an optional sign, decimal or exponent notation.
// inf/nan are refused (Accelerate would crash on int(inf)).
std::optional<double> parse_number(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::general);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

int64_t checked_bytes(double value, std::string_view size) {
  // 2^63 is exactly representable; anything at or above it does not fit an int64.
  if (!(value > -1.0) || value >= 9223372036854775808.0) bad_size(size);
  int64_t bytes = static_cast<int64_t>(value);  // truncates toward zero, like Python's int()
  if (bytes < 0) bad_size(size);
  return bytes;
}

bool is_plain_integer(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

Device parse_budget_device(std::string_view key) {
  Device device;
  try {
    device = Device::parse(key);
  } catch (const Error&) {
    throw Error(fmt::format("device '{}' is not recognized", key), "max_memory",
                "use GPU indices (0, 1, ...) or 'cuda:N', 'virt:N', 'cpu' and 'disk', e.g. {\"0\": \"10GiB\", "
                "\"cpu\": \"30GB\"}");
  }
  if (device.is_meta())
    throw Error("device 'meta' cannot hold weights", "max_memory",
                "use GPU indices (0, 1, ...) or 'cuda:N', 'virt:N', 'cpu' and 'disk'");
  return device;
}

// Accelerate's order: GPUs (ints, sorted), then cpu, then disk.
int order_rank(Device d) {
  if (d.is_accelerator()) return 0;
  return d.is_cpu() ? 1 : 2;
}

bool before(Device a, Device b) {
  if (order_rank(a) != order_rank(b)) return order_rank(a) < order_rank(b);
  return a < b;
}

}  // namespace

int64_t convert_file_size_to_int(std::string_view size) {
  if (is_plain_integer(size)) {
    int64_t bytes = 0;
    auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), bytes);
    if (ec != std::errc() || end != size.data() + size.size()) bad_size(size);
    return bytes;
  }
  struct Unit {
    const char* suffix;
    double scale;
    bool decimal;  // decimal units honour Accelerate's lower-case-b-means-bits rule
  };
  static constexpr Unit kUnits[] = {{"GIB", 1073741824.0, false}, {"MIB", 1048576.0, false}, {"KIB", 1024.0, false},
                                    {"GB", 1e9, true},            {"MB", 1e6, true},         {"KB", 1e3, true}};
  for (const Unit& unit : kUnits) {
    std::string_view suffix = unit.suffix;
    if (!ends_with_ci(size, suffix)) continue;
    auto number = parse_number(size.substr(0, size.size() - suffix.size()));
    if (!number) bad_size(size);
    int64_t bytes = checked_bytes(*number * unit.scale, size);
    // Accelerate: "8Gb" is gigabits. Python's // on a non-negative int is plain division.
    if (unit.decimal && size.back() == 'b') bytes /= 8;
    return bytes;
  }
  bad_size(size);
}

MaxMemory::MaxMemory(std::initializer_list<Entry> entries) {
  for (const Entry& e : entries) set(e.device, e.bytes);
}

void MaxMemory::set(Device device, int64_t bytes) {
  if (device.is_meta())
    throw Error("device 'meta' cannot hold weights", "max_memory", "use cuda:N, virt:N, cpu or disk");
  if (bytes < 0)
    throw Error(fmt::format("negative budget {} for {}", bytes, device.str()), "max_memory", kSizeHint);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return !before(e.device, device); });
  if (it != entries_.end() && it->device == device) {
    it->bytes = bytes;
    return;
  }
  entries_.insert(it, Entry{device, bytes});
}

bool MaxMemory::erase(Device device) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.device == device; });
  if (it == entries_.end()) return false;
  entries_.erase(it);
  return true;
}

std::optional<int64_t> MaxMemory::get(Device device) const {
  for (const Entry& e : entries_)
    if (e.device == device) return e.bytes;
  return std::nullopt;
}

std::vector<Device> MaxMemory::accelerators() const {
  std::vector<Device> out;
  for (const Entry& e : entries_)
    if (e.device.is_accelerator()) out.push_back(e.device);
  return out;
}

MaxMemory MaxMemory::parse(const std::vector<std::pair<std::string, std::string>>& entries) {
  MaxMemory out;
  for (const auto& [key, value] : entries) {
    Device device = parse_budget_device(key);
    if (out.contains(device))
      throw Error(fmt::format("device '{}' appears twice (as {})", key, device.str()), "max_memory",
                  "give each device one budget");
    try {
      out.set(device, convert_file_size_to_int(value));
    } catch (const Error& e) {
      throw e.with_context(fmt::format("max_memory[{}]", key));
    }
  }
  return out;
}

MaxMemory MaxMemory::from_json(std::string_view json_text) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("max_memory is not valid JSON: {}", e.what()), "max_memory",
                "write an object such as {\"0\": \"10GiB\", \"cpu\": \"30GB\"}");
  }
  if (!j.is_object())
    throw Error("max_memory must be a JSON object", "max_memory",
                "write an object such as {\"0\": \"10GiB\", \"cpu\": \"30GB\"}");
  std::vector<std::pair<std::string, std::string>> entries;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& v = it.value();
    if (v.is_string()) {
      entries.emplace_back(it.key(), v.get<std::string>());
    } else if (v.is_number_unsigned()) {
      entries.emplace_back(it.key(), std::to_string(v.get<uint64_t>()));
    } else {
      throw Error(fmt::format("budget {} is not a size", v.dump()), fmt::format("max_memory[{}]", it.key()),
                  kSizeHint);
    }
  }
  return parse(entries);
}

MaxMemory MaxMemory::from_flag(std::string_view flag) {
  std::vector<std::pair<std::string, std::string>> entries;
  while (!flag.empty()) {
    std::size_t comma = flag.find(',');
    std::string_view item = flag.substr(0, comma);
    flag = comma == std::string_view::npos ? std::string_view{} : flag.substr(comma + 1);
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos && (item == "disk" || (item.rfind("rank", 0) == 0 && item.ends_with(":disk")))) {
      entries.emplace_back(std::string(item), std::to_string(INT64_MAX));  // a disk without a size: no limit
      continue;
    }
    if (eq == std::string_view::npos || eq == 0)
      throw Error(fmt::format("'{}' is not DEVICE=SIZE", item), "--max-memory",
                  "write e.g. --max-memory 0=10GiB,1=10GiB,cpu=30GB");
    entries.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
  }
  return parse(entries);
}

std::string MaxMemory::to_json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const Entry& e : entries_) {
    std::string key = e.device.is_cuda() && e.device.rank == 0 ? std::to_string(e.device.index) : e.device.str();
    j[key] = e.bytes;
  }
  return j.dump();
}

std::string MaxMemory::describe() const {
  std::string out;
  for (const Entry& e : entries_) {
    if (!out.empty()) out += ", ";
    out += e.device.str() + "=" + format_bytes(e.bytes);
  }
  return out.empty() ? "(no devices)" : out;
}

int64_t available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  long pages = sysconf(_SC_AVPHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? int64_t(pages) * page_size : 0;
}

namespace {

std::uint64_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::uint64_t v = 0;
  if (!(in >> v)) return 0;
  return v;
}

}  // namespace

std::uint64_t cacheable_ram_bytes() {
  std::uint64_t available = static_cast<std::uint64_t>(std::max<int64_t>(available_host_memory(), 0));
  // cgroup v1 (memory controller) or v2 of this process: a limit below the machine's memory caps the page cache.
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (std::getline(cg, line)) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::string limit_file, usage_file;
    if (controllers == "memory") {
      limit_file = "/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes";
      usage_file = "/sys/fs/cgroup/memory" + path + "/memory.usage_in_bytes";
    } else if (controllers.empty() && line.rfind("0::", 0) == 0) {
      limit_file = "/sys/fs/cgroup" + path + "/memory.max";
      usage_file = "/sys/fs/cgroup" + path + "/memory.current";
    } else {
      continue;
    }
    const std::uint64_t limit = read_number(limit_file), usage = read_number(usage_file);
    if (limit > 0 && limit < (std::uint64_t{1} << 60)) {
      // The cgroup's page cache counts in its usage and is reclaimed first: what is not anonymous memory can cache.
      const std::uint64_t room = limit > usage ? limit - usage : 0;
      available = std::min(available, room);
    }
  }
  return available;
}

MaxMemory get_max_memory(const std::optional<MaxMemory>& user) {
  std::vector<Device> present = accelerator_devices();
  if (user) {
    for (Device d : user->accelerators()) {
      if (std::find(present.begin(), present.end(), d) != present.end()) continue;
      std::string names;
      for (Device p : present) names += (names.empty() ? "" : ", ") + p.str();
      log_warning("Device {} is not available, available devices are [{}]", d.str(), names);
    }
    return *user;
  }
  MaxMemory out;
  for (Device d : present) {
    auto backend = find_backend(d.kind);
    std::optional<std::size_t> free = backend ? backend->free_memory(d) : std::nullopt;
    if (!free) {
      log_info("Device {} seems unavailable (free memory unknown), proceeding to check subsequent devices.",
               d.str());
      continue;
    }
    out.set(d, static_cast<int64_t>(*free));
  }
  out.set(Device::cpu(), available_host_memory());
  return out;
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (std::abs(value) >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", value, units[unit]);
}

}  // namespace ferry
