// The DeviceMap container: ordered keys, in-place overwrite, and whole-component prefix lookup ("a.1" covers
// "a.1.weight" but never "a.10.weight"). See include/ferry/big_modeling/device_map.h.
#include "ferry/big_modeling/device_map.h"

#include <algorithm>

#include "ferry/core/error.h"

namespace ferry {

DeviceMap::DeviceMap(std::initializer_list<Entry> entries) {
  for (const Entry& e : entries) set(e.first, e.second);
}

void DeviceMap::set(const std::string& name, Device device) {
  if (device.is_meta())
    throw Error("'meta' is not a placement", "device_map[" + name + "]",
                "place each module on a GPU index, cuda:N, virt:N, cpu or disk");
  auto it = index_.find(name);
  if (it != index_.end()) {
    entries_[it->second].second = device;
    return;
  }
  index_.emplace(name, entries_.size());
  entries_.emplace_back(name, device);
}

bool DeviceMap::erase(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) return false;
  std::size_t pos = it->second;
  index_.erase(it);
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(pos));
  for (auto& [key, i] : index_)
    if (i > pos) --i;
  return true;
}

std::optional<Device> DeviceMap::at(std::string_view name) const {
  auto it = index_.find(std::string(name));
  if (it == index_.end()) return std::nullopt;
  return entries_[it->second].second;
}

std::optional<std::string> DeviceMap::key_for(std::string_view name) const {
  // Try "a.b.c", then "a.b", then "a", then "": each candidate ends at a component boundary.
  std::string candidate(name);
  while (true) {
    if (index_.count(candidate)) return candidate;
    if (candidate.empty()) return std::nullopt;
    std::size_t dot = candidate.rfind('.');
    candidate.resize(dot == std::string::npos ? 0 : dot);
  }
}

bool module_covers(std::string_view module, std::string_view name) {
  return module.empty() || (name.size() >= module.size() && name.compare(0, module.size(), module) == 0 &&
                            (name.size() == module.size() || name[module.size()] == '.'));
}

std::optional<Device> DeviceMap::device_for(std::string_view name) const {
  auto key = key_for(name);
  if (!key) return std::nullopt;
  return at(*key);
}

std::vector<Device> DeviceMap::devices() const {
  std::vector<Device> out;
  for (const auto& [name, device] : entries_)
    if (std::find(out.begin(), out.end(), device) == out.end()) out.push_back(device);
  return out;
}

bool operator==(const DeviceMap& a, const DeviceMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, device] : a.entries_) {
    auto other = b.at(name);
    if (!other || *other != device) return false;
  }
  return true;
}

}  // namespace ferry
