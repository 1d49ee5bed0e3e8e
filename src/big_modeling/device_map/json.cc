// DeviceMap <-> Accelerate's JSON form: {"model.layers.0": 0, "lm_head": "cpu", "x": "disk"}. GPUs are written as
// integers (as Accelerate and transformers write them), every other device as its string; virtual test devices
// as "virt:N". Reading is strict: a value that is not a device is an error naming its key.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "ferry/big_modeling/device_map.h"
#include "ferry/core/error.h"

namespace ferry {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kExample = R"(write e.g. {"model.layers.0": 0, "lm_head": "cpu", "model.norm": "disk"})";

Device device_from_json(const std::string& key, const Json& value) {
  std::string where = fmt::format("device_map[\"{}\"]", key);
  if (value.is_number_unsigned()) {
    uint64_t index = value.get<uint64_t>();
    if (index > 1000000) throw Error(fmt::format("GPU index {} is out of range", index), where, kExample);
    return Device::cuda(static_cast<int>(index));
  }
  if (value.is_string()) {
    Device device;
    try {
      device = Device::parse(value.get<std::string>());
    } catch (const Error& e) {
      throw Error(e.problem(), where, "use a GPU index, \"cuda:N\", \"cpu\", \"disk\" or \"virt:N\"");
    }
    if (device.is_meta())
      throw Error("'meta' is not a placement", where, "use a GPU index, \"cuda:N\", \"cpu\", \"disk\" or \"virt:N\"");
    return device;
  }
  throw Error(fmt::format("{} is not a device", value.dump()), where,
              "use a GPU index, \"cuda:N\", \"cpu\", \"disk\" or \"virt:N\"");
}

}  // namespace

DeviceMap DeviceMap::from_json(std::string_view json_text) {
  // A device map with a key twice is ambiguous; JSON parsers silently keep one, so look for it ourselves.
  std::set<std::string> seen;
  std::string duplicate;
  auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth == 1 && event == Json::parse_event_t::key) {
      std::string key = parsed.get<std::string>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  Json j;
  try {
    j = Json::parse(json_text.begin(), json_text.end(), on_event);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("device map is not valid JSON: {}", e.what()), "device_map", kExample);
  }
  if (!j.is_object()) throw Error("device map must be a JSON object", "device_map", kExample);
  if (!duplicate.empty())
    throw Error(fmt::format("key \"{}\" appears twice", duplicate), "device_map", "give each module one device");
  DeviceMap out;
  for (auto it = j.begin(); it != j.end(); ++it) out.set(it.key(), device_from_json(it.key(), it.value()));
  return out;
}

std::string DeviceMap::to_json(int indent) const {
  Json j = Json::object();
  for (const auto& [name, device] : entries_) {
    if (device.is_cuda() && device.rank == 0) j[name] = device.index;
    else
      j[name] = device.str();
  }
  return j.dump(indent);
}

std::ostream& operator<<(std::ostream& os, const DeviceMap& device_map) { return os << device_map.to_json(); }

DeviceMap DeviceMap::read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;  // NotFound only when the path is not there (exists() clears ec then)
    const bool missing = !std::filesystem::exists(path, ec) && !ec;
    throw Error(missing ? ErrorKind::NotFound : ErrorKind::InvalidValue, "cannot open device map file", path,
                "check the path");
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    return from_json(text.str());
  } catch (const Error& e) {
    throw e.with_context(path);
  }
}

void DeviceMap::write_json_file(const std::string& path) const {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write device map file", tmp, "check that the folder exists and is writable");
    out << to_json(2) << "\n";
    if (!out.flush()) throw Error("writing the device map failed", tmp, "check the free disk space");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("cannot rename the device map into place", path, "check that the folder is writable");
  }
}

}  // namespace ferry
