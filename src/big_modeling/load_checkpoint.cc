// load_checkpoint_in_model (see include/ferry/big_modeling/load_checkpoint.h), after Accelerate's
// utils/modeling.py. Shards are read one at a time; each tensor goes straight to the device its module is
// mapped to.
#include "ferry/big_modeling/load_checkpoint.h"

#include "ferry/big_modeling/dispatch.h"
#include "ferry/big_modeling/offload_plan.h"

#include <algorithm>
#include <functional>
#include <random>
#include <set>
#include <unordered_set>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/io/checkpoint.h"
#include "ferry/nn/module_tensors.h"

namespace ferry {
namespace {

// keep_in_fp32_modules: a key matches a whole dotted component run of the tensor name (Accelerate's substring
// test "key in name and key + '.' in name" without its false positives, e.g. "norm" in "layernorm.weight").
bool keep_in_fp32(const std::string& name, const std::vector<std::string>& keys) {
  for (const auto& k : keys) {
    if (name == k) return true;
    std::string padded = "." + name + ".", needle = "." + k + ".";
    if (padded.find(needle) != std::string::npos) return true;
  }
  return false;
}

std::filesystem::path make_temp_dir(const std::filesystem::path& parent) {
  std::random_device rd;
  for (int attempt = 0; attempt < 16; ++attempt) {
    auto p = parent / ("ferry-state-dict-" + std::to_string(rd()));
    if (std::filesystem::create_directories(p)) return p;
  }
  throw Error("cannot create a temporary folder", parent.string(), "check that it is writable");
}

struct TempDir {
  std::filesystem::path path;
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

// The device a tensor is loaded to: its entry in the device map, else where the model holds it now (cpu for meta).
Device tensor_device(nn::Module& model, const std::optional<DeviceMap>& map, const std::string& name) {
  if (map) {
    auto d = map->device_for(name);
    if (!d) throw Error("no device set for this tensor in the device map", name, "add its module (or \"\") to the map");
    return *d;
  }
  Device current = nn::get_module_tensor(model, name).device();
  return current.is_meta() ? Device::cpu() : current;
}

// The dtypes of one checkpoint tensor: `cast` is what set_module_tensor_to_device converts it to (none: the model
// slot's own), `target` the dtype it is used in, which offloaded copies are written in.
struct TensorDTypes {
  std::optional<DType> cast;
  DType target;
};

TensorDTypes tensor_dtypes(nn::Module& model, const std::string& name, const Tensor& value,
                           const LoadCheckpointOptions& o) {
  std::optional<DType> new_dtype;
  if (o.dtype && is_floating_point(value.dtype())) {
    new_dtype = o.dtype;
    if ((*o.dtype == DType::F16 || *o.dtype == DType::BF16) && keep_in_fp32(name, o.keep_in_fp32_modules))
      new_dtype = DType::F32;
  }
  const DType slot = nn::get_module_tensor(model, name).dtype();
  if (is_quantized(slot)) new_dtype = slot;  // a quantized slot (quantize_weights) keeps its dtype
  const DType stored = new_dtype.value_or(slot);
  return {new_dtype, is_floating_point(value.dtype()) ? stored : value.dtype()};
}

// One load_checkpoint_in_model call: the model's names, what has been loaded so far, the weights parked in the
// temporary state-dict folder, and the result being built.
class CheckpointLoader {
 public:
  CheckpointLoader(nn::Module& model, const std::filesystem::path& checkpoint, const LoadCheckpointOptions& o,
                   const io::CheckpointFiles& files)
      : model_(model), checkpoint_(checkpoint), o_(o) {
    for (auto& [name, t] : model.state_dict()) model_keys_.insert(name);
    for (auto& [name, t] : model.named_buffers()) buffer_names_.insert(name);
    if (o.offload_state_dict)
      state_dict_folder_.path = make_temp_dir(o.offload_folder.value_or(std::filesystem::temp_directory_path()));
    progress_.shard_count = files.shards.size();
    if (o.on_progress)
      for (const auto& shard : files.shards) progress_.bytes_total += std::filesystem::file_size(shard);
  }

  // Loads every tensor of `shard` the model has; the others are unexpected keys (an error when strict).
  void load_shard(const std::filesystem::path& shard) {
    ++progress_.shard_index;
    progress_.shard_name = shard.filename().string();
    progress_.tensors_done = 0;
    const bool safetensors = io::checkpoint_file_format(shard) == io::CheckpointFormat::Safetensors;
    io::StateDict sd = io::load_state_dict(shard);  // safetensors: zero-copy views; cast per tensor below
    std::vector<std::string> unexpected;
    for (const auto& [key, t] : sd)
      if (model_name(key).empty()) unexpected.push_back(key);
    if (o_.strict && !unexpected.empty())
      throw Error("checkpoint tensors not in the model: " + list_for_error(unexpected), shard.string(),
                  "is this checkpoint for this architecture? (strict loading)");
    result_.unexpected_keys.insert(result_.unexpected_keys.end(), unexpected.begin(), unexpected.end());
    progress_.tensors_in_shard = sd.size();

    for (const auto& [key, value] : sd) {
      const std::string name = model_name(key);
      if (!name.empty() && forward_) forward_(key, name, value);
      if (name.empty() || skipped(name)) continue;
      place(name, key, value, shard, safetensors);
      loaded_.insert(name);
      result_.bytes_read += value.nbytes();
      progress_.bytes_done += value.nbytes();
      ++progress_.tensors_done;
      if (o_.on_progress) o_.on_progress(progress_);
    }
  }

  // broadcast_from_rank0, rank 0: called with each checkpoint tensor the model has, before it is placed here.
  void forward_to(std::function<void(const std::string&, const std::string&, const Tensor&)> f) {
    forward_ = std::move(f);
  }

  // broadcast_from_rank0, another rank: a tensor rank 0 read (`key` as the checkpoint names it).
  void receive(const std::string& key, const Tensor& value) {
    const std::string name = model_name(key);
    if (name.empty() || skipped(name))
      throw Error("rank 0 sent a tensor this rank does not load", key, "every rank must load the same model");
    place(name, key, value, {}, /*safetensors=*/false);  // no file here: disk weights go to the offload folder
    loaded_.insert(name);
    result_.bytes_read += value.nbytes();
  }

  // The model's tensors this rank loads: its state dict less the skipped modules.
  std::vector<std::string> wanted() const {
    std::vector<std::string> out;
    for (const auto& name : model_keys_)
      if (!skipped(name)) out.push_back(name);
    return out;
  }

  // After the last shard: reports unexpected and missing keys (missing ones are an error when strict), saves the
  // offload index and brings the parked state-dict weights back to cpu.
  LoadCheckpointResult finish(bool has_disk) {
    result_.missing_keys = missing_keys();
    if (!result_.unexpected_keys.empty())
      log_warning("Some weights of the checkpoint at {} were not used when initializing {}: {}", checkpoint_.string(),
                  model_.type_name(), list_for_error(result_.unexpected_keys));
    if (!result_.missing_keys.empty()) {
      std::string msg = "weights missing from the checkpoint (left uninitialised): " +
                        list_for_error(result_.missing_keys);
      if (o_.strict) throw Error(msg, checkpoint_.string(), "is this checkpoint complete and for this model?");
      log_warning("{}: {}", checkpoint_.string(), msg);
    }

    if (has_disk && o_.offload_folder) io::save_offload_index(result_.offload_index, *o_.offload_folder);
    for (const auto& [name, entry] : state_dict_index_) {
      Tensor parked = io::load_offloaded_weight(state_dict_folder_.path / (name + ".dat"), entry);
      nn::set_module_tensor_to_device(model_, name, Device::cpu(), parked.clone());
    }
    return std::move(result_);
  }

 private:
  // Puts one tensor where the device map says: offloaded to disk (served from the shard or written to the offload
  // folder), parked in the state-dict folder, or set on its device.
  // The model's name for checkpoint key `key` (itself, or with the base_model_prefix added); empty for none.
  // A tensor of a module another rank of a pipeline loads (LoadCheckpointOptions::skip_modules).
  bool skipped(const std::string& name) const {
    return std::any_of(o_.skip_modules.begin(), o_.skip_modules.end(),
                       [&](const std::string& m) { return module_covers(m, name); });
  }

  std::string model_name(const std::string& key) const {
    if (model_keys_.count(key)) return key;
    if (o_.base_model_prefix.empty()) return {};
    std::string prefixed = o_.base_model_prefix + "." + key;
    return model_keys_.count(prefixed) ? prefixed : std::string();
  }

  // `name` is the model's, `key` the checkpoint's (they differ by the base_model_prefix).
  void place(const std::string& name, const std::string& key, const Tensor& value, const std::filesystem::path& shard,
             bool safetensors) {
    const Device device = tensor_device(model_, o_.device_map, name);
    const auto [new_dtype, target] = tensor_dtypes(model_, name, value, o_);
    if (device.is_disk() && (o_.offload_buffers || !buffer_names_.count(name))) {
      nn::set_module_tensor_to_device(model_, name, Device::meta(), {}, target);
      if (safetensors && value.dtype() == target) {
        // Served from the checkpoint itself: nothing is copied (DESIGN.md, big_modeling 16).
        io::OffloadEntry e;
        e.safetensors_file = std::filesystem::absolute(shard).string();
        e.weight_name = key;
        e.dtype = target;
        result_.offload_index[name] = std::move(e);
      } else {
        // Written once in the dtype it will be used in (Accelerate writes the checkpoint dtype and casts on
        // every load).
        io::offload_weight(value.to(target), name, need_offload_folder(name), result_.offload_index);
      }
    } else if (device.is_disk()) {
      nn::set_module_tensor_to_device(model_, name, Device::cpu(), value, new_dtype);  // a disk module's buffer
    } else if (device.is_cpu() && o_.offload_state_dict && !(safetensors && value.dtype() == target)) {
      // Staged through a temporary folder to bound peak RAM. A same-dtype safetensors weight needs no staging:
      // it is a view of the mapped file, not an allocation.
      nn::set_module_tensor_to_device(model_, name, Device::meta(), {}, target);
      io::offload_weight(value.to(target), name, state_dict_folder_.path, state_dict_index_);
    } else {
      nn::set_module_tensor_to_device(model_, name, device, value, new_dtype);
    }
  }

  // Disk weights read straight from safetensors shards need no folder; anything that must be written does.
  const std::filesystem::path& need_offload_folder(const std::string& name) const {
    if (!o_.offload_folder)
      throw Error("at least one submodule is mapped to disk and its weights must be written (" + name +
                      " is not in a safetensors file in the requested dtype), but no offload_folder was given",
                  checkpoint_.string(), "pass offload_folder (a writable folder for the offloaded weights)");
    return *o_.offload_folder;
  }

  // The model's names not loaded, sorted. A tied name counts as loaded when its partner was (a checkpoint stores a
  // tied weight once).
  std::vector<std::string> missing_keys() const {
    std::set<const nn::TensorSlot*> loaded_slots;
    for (const auto& name : loaded_)
      if (auto slot = nn::find_tensor_slot(model_, name)) loaded_slots.insert(slot.get());
    std::vector<std::string> missing;
    for (const auto& name : model_keys_) {
      if (loaded_.count(name) || skipped(name)) continue;
      auto slot = nn::find_tensor_slot(model_, name);
      if (!slot || !loaded_slots.count(slot.get())) missing.push_back(name);
    }
    std::sort(missing.begin(), missing.end());
    return missing;
  }

  nn::Module& model_;
  const std::filesystem::path& checkpoint_;
  const LoadCheckpointOptions& o_;
  std::unordered_set<std::string> model_keys_, buffer_names_;
  std::set<std::string> loaded_;
  TempDir state_dict_folder_;
  io::OffloadIndex state_dict_index_;
  LoadProgress progress_;
  LoadCheckpointResult result_;
  std::function<void(const std::string&, const std::string&, const Tensor&)> forward_;
};

constexpr int kBroadcastTag = 7003;

// broadcast_from_rank0 (LoadCheckpointOptions): rank 0 reads the checkpoint and sends each tensor to the ranks that
// load it — each told rank 0 first which of the model's tensors it loads — and loads its own; the others place what
// they receive and never touch the files. Messages: a rank's wanted names (one string, '\n'-separated); then per
// tensor its checkpoint key and the tensor, and an empty key at the end.
LoadCheckpointResult broadcast_load(nn::Module& model, const std::filesystem::path& checkpoint,
                                    const LoadCheckpointOptions& o, ProcessGroup& group, bool has_disk) {
  if (group.rank() != 0) {
    CheckpointLoader loader(model, checkpoint, o, io::CheckpointFiles{});
    std::string names;
    for (const auto& n : loader.wanted()) names += n + "\n";
    group.send_string(names, 0, kBroadcastTag);
    for (;;) {
      const std::string key = group.recv_string(0, kBroadcastTag);
      if (key.empty()) break;
      loader.receive(key, group.recv_tensor(0, kBroadcastTag));
    }
    return loader.finish(has_disk);
  }
  const io::CheckpointFiles files = io::get_checkpoint_shard_files(checkpoint);
  std::vector<std::unordered_set<std::string>> wants(static_cast<std::size_t>(group.size()));
  for (int r = 1; r < group.size(); ++r) {
    const std::string names = group.recv_string(r, kBroadcastTag);
    auto& w = wants[static_cast<std::size_t>(r)];
    for (std::size_t at = 0; at < names.size();) {
      const std::size_t nl = names.find('\n', at);
      w.insert(names.substr(at, nl - at));
      at = nl == std::string::npos ? names.size() : nl + 1;
    }
  }
  CheckpointLoader loader(model, checkpoint, o, files);
  loader.forward_to([&](const std::string& key, const std::string& name, const Tensor& value) {
    for (int r = 1; r < group.size(); ++r) {
      if (!wants[static_cast<std::size_t>(r)].count(name)) continue;
      group.send_string(key, r, kBroadcastTag);
      group.send_tensor(value, r, kBroadcastTag);
    }
  });
  for (const auto& shard : files.shards) loader.load_shard(shard);
  for (int r = 1; r < group.size(); ++r) group.send_string("", r, kBroadcastTag);
  return loader.finish(has_disk);
}

}  // namespace

LoadCheckpointResult load_checkpoint_in_model(nn::Module& model, const std::filesystem::path& checkpoint,
                                              const LoadCheckpointOptions& o) {
  const auto& map = o.device_map;
  const bool has_disk = map && std::any_of(map->begin(), map->end(), [](const auto& e) { return e.second.is_disk(); });
  if (has_disk && o.offload_folder) std::filesystem::create_directories(*o.offload_folder);

  if (o.broadcast_from_rank0) {
    const std::shared_ptr<ProcessGroup> group = o.process_group ? o.process_group : world_process_group();
    if (group->size() > 1) return broadcast_load(model, checkpoint, o, *group, has_disk);
  }
  // Discovery first: a missing shard is an error before any byte is loaded.
  const io::CheckpointFiles files = io::get_checkpoint_shard_files(checkpoint);
  CheckpointLoader loader(model, checkpoint, o, files);
  for (const auto& shard : files.shards) loader.load_shard(shard);
  return loader.finish(has_disk);
}

LoadAndDispatchResult load_checkpoint_and_dispatch(nn::Module& model, const std::filesystem::path& checkpoint,
                                                   const LoadAndDispatchOptions& o) {
  LoadAndDispatchResult result;
  std::optional<DeviceMap> map;
  OffloadIo offload_io = o.offload_io;
  std::size_t staging_bytes = 0;
  if (auto* m = std::get_if<DeviceMap>(&o.device_map)) {
    map = *m;
  } else if (auto* mode = std::get_if<std::string>(&o.device_map)) {
    PlanOptions plan;
    plan.max_memory = o.max_memory;
    plan.no_split_module_classes = o.no_split_module_classes;
    plan.dtype = o.dtype;
    plan.offload_buffers = o.offload_buffers;
    plan.reservations = o.reservations;
    OffloadPlan planned = plan_with_offload_io(model, parse_device_map_mode(*mode), plan, o.offload_io, o.prefetch);
    map = std::move(planned.device_map);
    offload_io = planned.choice.io;
    staging_bytes = planned.choice.staging_bytes;
  }
  LoadCheckpointOptions load;
  load.device_map = map;
  load.offload_folder = o.offload_folder;
  load.dtype = o.dtype;
  load.offload_buffers = o.offload_buffers;
  load.strict = o.strict;
  load.on_progress = o.on_progress;
  load.broadcast_from_rank0 = o.broadcast_from_rank0;
  load.process_group = o.process_group;
  const bool has_disk = map && std::any_of(map->begin(), map->end(), [](const auto& e) { return e.second.is_disk(); });
  load.offload_state_dict = o.offload_state_dict.value_or(has_disk);
  result.load = load_checkpoint_in_model(model, checkpoint, load);
  if (!map) return result;
  result.device_map = *map;
  DispatchOptions d;
  d.offload_dir = o.offload_folder;
  if (has_disk) d.offload_index = result.load.offload_index;
  d.offload_buffers = o.offload_buffers;
  d.skip_keys = o.skip_keys;
  d.preload_module_classes = o.preload_module_classes;
  d.force_hooks = o.force_hooks;
  d.prefetch = o.prefetch;
  d.offload_io = offload_io;
  d.staging_bytes = staging_bytes;
  dispatch_model(model, *map, d);
  return result;
}

}  // namespace ferry
