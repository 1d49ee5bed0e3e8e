// Checkpoint discovery and whole-checkpoint loading (see include/ferry/io/checkpoint.h).
#include "ferry/io/checkpoint.h"

#include <algorithm>
#include <set>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/io/safetensors.h"
#include "ferry/io/torch_bin.h"
#include "io/atomic_file.h"
#include "io/json_strict.h"

namespace fs = std::filesystem;

namespace ferry::io {
namespace {

constexpr std::size_t kMaxIndexBytes = 64u << 20;

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// `p` is `folder`/`name`; refuses a symlink whose target leaves the folder, unless it is a Hugging Face hub cache
// snapshot pointing into the same repository's blobs/ folder.
void check_inside(const fs::path& folder, const fs::path& p, const std::string& where) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(p, ec))) return;
  const fs::path target = fs::weakly_canonical(p, ec);
  const fs::path root = fs::weakly_canonical(folder, ec);
  auto under = [](const fs::path& child, const fs::path& parent) {
    auto [pe, ce] = std::mismatch(parent.begin(), parent.end(), child.begin(), child.end());
    return pe == parent.end() && ce != child.end();
  };
  if (under(target, root)) return;
  if (root.parent_path().filename() == "snapshots" && under(target, root.parent_path().parent_path() / "blobs"))
    return;
  throw Error("shard \"" + p.filename().string() + "\" is a symlink to " + target.string() +
                  ", outside the checkpoint folder",
              where, "shards must live in the checkpoint's folder");
}

CheckpointFiles from_index(const fs::path& index_file) {
  const std::string where = index_file.string();
  CheckpointIndex index = parse_checkpoint_index(detail::read_small_file(index_file, kMaxIndexBytes), where);
  CheckpointFiles out;
  out.folder = index_file.parent_path();
  out.index_file = index_file;
  std::set<std::string> names;
  for (const auto& [tensor, shard] : index.weight_map) names.insert(shard);
  bool any_bin = false, any_st = false;
  std::vector<std::string> missing;
  for (const auto& name : names) {
    const fs::path p = out.folder / name;
    std::error_code ec;
    if (!fs::exists(p, ec)) {  // follows symlinks: a dangling link counts as missing
      missing.push_back(name);
      continue;
    }
    check_inside(out.folder, p, where);
    if (!fs::is_regular_file(p, ec)) throw Error("shard \"" + name + "\" is not a regular file", where);
    (checkpoint_file_format(p) == CheckpointFormat::TorchBin ? any_bin : any_st) = true;
    out.shards.push_back(p);
  }
  if (!missing.empty()) {
    std::string list;
    for (std::size_t i = 0; i < missing.size() && i < 10; ++i) list += (i ? ", " : "") + missing[i];
    if (missing.size() > 10) list += ", ...";
    throw Error(ErrorKind::NotFound,
                "index names " + std::to_string(missing.size()) + " shard file(s) that do not exist in " +
                    out.folder.string() + ": " + list,
                where, "the download is incomplete; fetch the missing shards");
  }
  if (any_bin && any_st) throw Error("index mixes safetensors and .bin shards", where);
  out.format = any_bin ? CheckpointFormat::TorchBin : CheckpointFormat::Safetensors;
  out.weight_map = std::move(index.weight_map);
  return out;
}

CheckpointFiles from_file(const fs::path& file) {
  CheckpointFiles out;
  out.folder = file.parent_path();
  out.format = checkpoint_file_format(file);
  out.shards.push_back(file);
  return out;
}

CheckpointFiles from_folder(const fs::path& folder) {
  static constexpr const char* kNames[] = {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                                           "pytorch_model.bin.index.json"};
  std::vector<std::string> present;
  std::error_code ec;
  for (const char* n : kNames)
    if (fs::exists(folder / n, ec)) present.push_back(n);
  fs::path chosen;
  if (!present.empty()) {
    chosen = folder / present[0];
    if (present.size() > 1) {
      std::string list;
      for (const auto& n : present) list += (list.empty() ? "" : ", ") + n;
      log_info("{}: found {}; using {}", folder.string(), list, present[0]);
    }
  } else {
    std::vector<fs::path> indexes, safetensors;
    for (const auto& e : fs::directory_iterator(folder, ec)) {
      const std::string n = e.path().filename().string();
      if (ends_with(n, ".index.json")) indexes.push_back(e.path());
      else if (ends_with(n, ".safetensors")) safetensors.push_back(e.path());
    }
    if (indexes.size() == 1) chosen = indexes[0];
    else if (indexes.empty() && safetensors.size() == 1) chosen = safetensors[0];
    else
      throw Error(ErrorKind::NotFound, "no checkpoint found in folder", folder.string(),
                  "expected model.safetensors, model.safetensors.index.json, pytorch_model.bin or "
                  "pytorch_model.bin.index.json (or exactly one *.index.json or *.safetensors)");
  }
  check_inside(folder, chosen, folder.string());
  return ends_with(chosen.filename().string(), ".json") ? from_index(chosen) : from_file(chosen);
}

}  // namespace

bool is_plain_file_name(std::string_view name) noexcept {
  return !name.empty() && name != "." && name != ".." && name.find_first_of(std::string_view("/\\\0", 3)) ==
                                                            std::string_view::npos;
}

CheckpointIndex parse_checkpoint_index(std::string_view json, const std::string& where) {
  const nlohmann::json j = detail::parse_json_strict(json, where, "checkpoint index");
  if (!j.is_object()) throw Error("checkpoint index must be a JSON object", where);
  if (!j.contains("weight_map")) throw Error("checkpoint index has no \"weight_map\"", where);
  CheckpointIndex out;
  const auto& wm = j["weight_map"];
  if (!wm.is_object()) throw Error("\"weight_map\" must map tensor names to file names", where);
  for (const auto& [tensor, shard] : wm.items()) {
    if (!shard.is_string())
      throw Error("weight_map value must be a file name, got " + detail::json_brief(shard), where + ": " + tensor);
    const std::string name = shard.get<std::string>();
    if (!is_plain_file_name(name))
      throw Error("shard name \"" + name + "\" is not a plain file name", where + ": " + tensor,
                  "an index may only name files in its own folder");
    out.weight_map.emplace(tensor, name);
  }
  if (out.weight_map.empty()) throw Error("\"weight_map\" lists no tensors", where);
  if (j.contains("metadata")) {
    const auto& md = j["metadata"];
    if (!md.is_object()) throw Error("\"metadata\" must be an object", where);
    if (md.contains("total_size") && !md["total_size"].is_null()) {
      auto n = detail::json_nonneg_int(md["total_size"]);
      // Some writers store it as a float; accept an integral, non-negative one.
      if (!n && md["total_size"].is_number_float()) {
        const double d = md["total_size"].get<double>();
        if (d >= 0 && d < 9.2e18 && d == static_cast<double>(static_cast<int64_t>(d))) n = static_cast<int64_t>(d);
      }
      if (!n)
        throw Error("\"total_size\" must be a non-negative integer, got " + detail::json_brief(md["total_size"]),
                    where);
      out.total_size = static_cast<uint64_t>(*n);
    }
  }
  return out;
}

CheckpointFormat checkpoint_file_format(const fs::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".safetensors") return CheckpointFormat::Safetensors;
  if (ext == ".bin" || ext == ".pt" || ext == ".pth") return CheckpointFormat::TorchBin;
  return looks_like_zip(file) ? CheckpointFormat::TorchBin : CheckpointFormat::Safetensors;
}

CheckpointFiles get_checkpoint_shard_files(const fs::path& checkpoint) {
  std::error_code ec;
  const auto st = fs::status(checkpoint, ec);
  if (!fs::exists(st))
    throw Error(ErrorKind::NotFound, "checkpoint not found", checkpoint.string(),
                "pass a .safetensors/.bin file, an index or a folder");
  if (fs::is_directory(st)) return from_folder(checkpoint);
  if (ends_with(checkpoint.filename().string(), ".json")) return from_index(checkpoint);
  if (!fs::is_regular_file(st)) throw Error("checkpoint is not a regular file", checkpoint.string());
  return from_file(checkpoint);
}

StateDict load_state_dict(const fs::path& file, std::optional<DType> dtype) {
  return checkpoint_file_format(file) == CheckpointFormat::TorchBin ? load_torch_bin(file, dtype)
                                                                     : load_safetensors(file, dtype);
}

StateDict load_checkpoint(const fs::path& checkpoint, std::optional<DType> dtype) {
  const CheckpointFiles files = get_checkpoint_shard_files(checkpoint);
  StateDict out;
  std::map<std::string, std::string> found_in;  // tensor -> shard file name
  for (const auto& shard : files.shards) {
    StateDict part = load_state_dict(shard, dtype);
    for (const auto& [name, tensor] : part) {
      if (out.contains(name))
        throw Error("tensor also appears in " + found_in[name], shard.string() + ": " + name,
                    "a tensor must be stored once");
      out.insert(name, tensor);
      found_in[name] = shard.filename().string();
    }
  }
  for (const auto& [name, shard] : files.weight_map) {
    auto it = found_in.find(name);
    if (it == found_in.end() || it->second != shard)
      throw Error("the index places this tensor in " + shard + ", which does not hold it",
                  files.index_file->string() + ": " + name,
                  "the index and the shards do not match; re-download the checkpoint");
  }
  return out;
}

}  // namespace ferry::io
