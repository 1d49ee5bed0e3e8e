// DeviceMap: the plan every other part of ferry obeys — module (or tensor) name → cuda:N / virt:N / cpu / disk.
//
// It is Accelerate's `device_map` dict: ordered, keys are dotted module names ("" is the whole model), and a tensor
// belongs to the entry whose key is its longest *whole-component* prefix ("a.1" covers "a.1.weight" but never
// "a.10.weight"). JSON is Accelerate's form, so plans are interchangeable:
//   {"model.embed_tokens": 0, "model.layers.0": 0, "model.layers.1": "cpu", "lm_head": "disk"}
// (GPUs as integers, other devices as strings; "cuda:1" is read as 1 and virtual test devices as "virt:N").
//
// Planning from a model (infer_auto_device_map, balanced modes, reservations) lives in auto_device_map.h and
// balanced_memory.h; sizes in module_sizes.h; budgets in max_memory.h.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ferry/core/device.h"

namespace ferry {
namespace nn {
class Module;
}

/// Ordered module-name → Device map. A value type; not thread-safe for concurrent mutation.
///
///   DeviceMap map = DeviceMap::from_json(R"({"linear1": 0, "linear2": "cpu"})");
///   map.device_for("linear1.weight");  // cuda:0
class DeviceMap {
 public:
  using Entry = std::pair<std::string, Device>;

  DeviceMap() = default;
  DeviceMap(std::initializer_list<Entry> entries);

  /// Inserts at the end, or overwrites in place when `name` is already a key. Throws ferry::Error for meta.
  void set(const std::string& name, Device device);
  bool erase(const std::string& name);
  /// The device of exactly this key.
  std::optional<Device> at(std::string_view name) const;
  bool contains(std::string_view name) const { return index_.count(std::string(name)) != 0; }

  /// The key covering `name` (a tensor or module name): `name` itself, else its longest whole-component prefix
  /// that is a key, else "" when "" is a key; nullopt when nothing covers it.
  std::optional<std::string> key_for(std::string_view name) const;
  /// The device of key_for(name).
  std::optional<Device> device_for(std::string_view name) const;

  const std::vector<Entry>& entries() const { return entries_; }
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  /// The distinct devices used, in order of first appearance.
  std::vector<Device> devices() const;

  /// Parses Accelerate's JSON form. Throws ferry::Error naming the bad key ("lm_head": true is not a device).
  static DeviceMap from_json(std::string_view json_text);
  /// Accelerate's JSON form; indent < 0 writes one line.
  std::string to_json(int indent = -1) const;
  /// Reads / writes a JSON file (the write goes to a temporary file renamed into place).
  static DeviceMap read_json_file(const std::string& path);
  void write_json_file(const std::string& path) const;

  /// Same keys with the same devices, in any order (like Python dict equality).
  friend bool operator==(const DeviceMap& a, const DeviceMap& b);

 private:
  std::vector<Entry> entries_;
  std::unordered_map<std::string, std::size_t> index_;  // key -> position in entries_
};

/// Whether the device-map key `module` covers the tensor or module `name`: "" covers everything; otherwise `name`
/// is `module` itself or lies below it at a component boundary ("a.1" covers "a.1.weight", never "a.10.weight").
/// Accelerate: the `name == module or name.startswith(module + ".")` tests of accelerate.utils.modeling.
bool module_covers(std::string_view module, std::string_view name);

/// Prints the one-line JSON form (for logs and test failures).
std::ostream& operator<<(std::ostream& os, const DeviceMap& device_map);

/// Groups submodules that share a device into their parent: {"a": 0, "b": 0, "c": 0} → {"": 0};
/// {"a.x": 0, "a.y": 0, "b": 1} → {"a": 0, "b": 1}. A prefix collapses only when it has two or more entries below
/// it and all of them agree. Accelerate: clean_device_map.
/// Unlike Accelerate (which re-appends merged keys at the end), a merged key takes the place of the first entry
/// it replaces, so the map keeps execution order.
DeviceMap clean_device_map(const DeviceMap& device_map);

/// Checks that `device_map` covers every tensor of `model`'s state_dict. Accelerate: check_device_map.
/// Throws ferry::Error listing the first uncovered tensor names; keys naming no submodule are a warning.
void check_device_map(const nn::Module& model, const DeviceMap& device_map);

}  // namespace ferry
