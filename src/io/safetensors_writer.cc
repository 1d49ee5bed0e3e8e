// safetensors writer: one file, or shards plus model.safetensors.index.json (see include/ferry/io/safetensors.h).
//
// Layout choices follow the reference writer: the header is padded with spaces to a multiple of 8 bytes, and
// tensors are grouped by element size (largest first), so every tensor starts at a multiple of its element size
// and a reader can use the mapping in place.
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "ferry/core/error.h"
#include "ferry/io/safetensors.h"
#include "io/atomic_file.h"

namespace ferry::io {
namespace {

// The bytes of `t` on the host (a copy only when t lives elsewhere).
Tensor host_bytes(const Tensor& t, const std::string& name, const std::filesystem::path& path) {
  if (!t.defined()) throw Error("tensor is undefined", path.string() + ": " + name);
  if (t.is_meta())
    throw Error("meta tensor has no data to write", path.string() + ": " + name,
                "load or materialise its weights before saving");
  if (is_quantized(t.dtype()))
    throw Error("safetensors has no " + std::string(dtype_name(t.dtype())) + " dtype", path.string() + ": " + name,
                "save quantized weights as GGUF (ferry quantize), or dequantize with .to(DType::F32) first");
  return t.device().is_host_addressable() ? t : t.to(Device::cpu());
}

std::vector<const StateDict::Item*> file_order(const std::vector<const StateDict::Item*>& items) {
  std::vector<const StateDict::Item*> order = items;
  std::stable_sort(order.begin(), order.end(), [](const StateDict::Item* a, const StateDict::Item* b) {
    return dtype_size(a->second.dtype()) > dtype_size(b->second.dtype());
  });
  return order;
}

void write_file(const std::vector<const StateDict::Item*>& items, const std::filesystem::path& path,
                const std::map<std::string, std::string>& metadata) {
  const auto order = file_order(items);
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::size_t offset = 0;
  for (const auto* item : order) {
    const Tensor& t = item->second;
    if (header.contains(item->first) || item->first == "__metadata__")
      throw Error("tensor name is duplicated or reserved", path.string() + ": " + item->first);
    header[item->first] = {{"dtype", safetensors_dtype_name(t.dtype())},
                           {"shape", t.shape()},
                           {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');

  detail::AtomicFile out(path);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out.write(len, 8);
  out.write(text);
  for (const auto* item : order) {
    Tensor host = host_bytes(item->second, item->first, path);
    if (host.nbytes() > 0) out.write(host.raw_data(), host.nbytes());
  }
  out.commit(/*durable=*/false);
}

std::string shard_name(std::string_view prefix, std::size_t i, std::size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "-%05zu-of-%05zu.safetensors", i, n);
  return std::string(prefix) + buf;
}

bool is_shard_name(std::string_view name, std::string_view prefix) {
  // "<prefix>-ddddd-of-ddddd.safetensors"
  constexpr std::string_view tail = ".safetensors";
  if (name.size() != prefix.size() + 1 + 5 + 4 + 5 + tail.size() || name.substr(0, prefix.size()) != prefix)
    return false;
  std::string_view rest = name.substr(prefix.size());
  auto digits = [](std::string_view s) { return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }); };
  return rest[0] == '-' && digits(rest.substr(1, 5)) && rest.substr(6, 4) == "-of-" && digits(rest.substr(10, 5)) &&
         rest.substr(15) == tail;
}

// Removes files of an earlier save with the same prefix that this save did not write, so a folder never holds a
// stale model.safetensors beside a new index (discovery prefers the single file) or shards of another count.
void remove_stale(const std::filesystem::path& folder, std::string_view prefix, const ShardedSave& kept) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    const bool ours = name == std::string(prefix) + ".safetensors" ||
                      name == std::string(prefix) + ".safetensors.index.json" || is_shard_name(name, prefix);
    if (!ours) continue;
    const bool keep = std::find(kept.shards.begin(), kept.shards.end(), entry.path()) != kept.shards.end() ||
                      (kept.index && *kept.index == entry.path());
    if (!keep) std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace

std::map<std::string, std::string> default_safetensors_metadata() { return {{"format", "pt"}}; }

void save_safetensors(const StateDict& tensors, const std::filesystem::path& path,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<const StateDict::Item*> items;
  items.reserve(tensors.size());
  for (const auto& item : tensors) items.push_back(&item);
  write_file(items, path, metadata);
}

ShardedSave save_sharded_safetensors(const StateDict& tensors, const std::filesystem::path& folder,
                                     std::size_t max_shard_size, std::string_view prefix,
                                     const std::map<std::string, std::string>& metadata) {
  if (max_shard_size == 0) throw Error("max_shard_size must be positive", folder.string());
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) throw Error("cannot create folder: " + ec.message(), folder.string());

  // Greedy split in state-dict order, as transformers' split_torch_state_dict_into_shards does.
  std::vector<std::vector<const StateDict::Item*>> shards(1);
  std::size_t current = 0;
  ShardedSave result;
  for (const auto& item : tensors) {
    const std::size_t n = item.second.nbytes();
    if (!shards.back().empty() && current + n > max_shard_size) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(&item);
    current += n;
    result.total_size += n;
  }

  if (shards.size() == 1) {
    result.shards.push_back(folder / (std::string(prefix) + ".safetensors"));
    write_file(shards[0], result.shards[0], metadata);
    remove_stale(folder, prefix, result);
    return result;
  }
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shard_name(prefix, i + 1, shards.size());
    result.shards.push_back(folder / name);
    write_file(shards[i], result.shards.back(), metadata);
    for (const auto* item : shards[i]) result.weight_map[item->first] = name;
  }
  nlohmann::json index = {{"metadata", {{"total_size", result.total_size}}}, {"weight_map", result.weight_map}};
  result.index = folder / (std::string(prefix) + ".safetensors.index.json");
  detail::AtomicFile out(*result.index);
  out.write(index.dump(2) + "\n");
  out.commit(/*durable=*/false);
  remove_stale(folder, prefix, result);
  return result;
}

}  // namespace ferry::io
