// load_checkpoint_in_model (see include/ferry/big_modeling/load_checkpoint.h), after Accelerate's
// utils/modeling.py. Shards are read one at a time; each tensor goes straight to the device its module is
// mapped to.
#include "ferry/big_modeling/load_checkpoint.h"

#include "ferry/big_modeling/dispatch.h"
#include "ferry/big_modeling/offload_plan.h"

#include <algorithm>
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

}  // namespace

LoadCheckpointResult load_checkpoint_in_model(nn::Module& model, const std::filesystem::path& checkpoint,
                                              const LoadCheckpointOptions& o) {
  LoadCheckpointResult result;
  const auto& map = o.device_map;
  const bool has_disk = map && std::any_of(map->begin(), map->end(), [](const auto& e) { return e.second.is_disk(); });
  // Disk weights read straight from safetensors shards need no folder; anything that must be written does.
  auto need_offload_folder = [&](const std::string& name) -> const std::filesystem::path& {
    if (!o.offload_folder)
      throw Error("at least one submodule is mapped to disk and its weights must be written (" + name +
                      " is not in a safetensors file in the requested dtype), but no offload_folder was given",
                  checkpoint.string(), "pass offload_folder (a writable folder for the offloaded weights)");
    return *o.offload_folder;
  };
  if (has_disk && o.offload_folder) std::filesystem::create_directories(*o.offload_folder);

  // Discovery first: a missing shard is an error before any byte is loaded.
  const io::CheckpointFiles files = io::get_checkpoint_shard_files(checkpoint);

  std::unordered_set<std::string> model_keys;
  for (auto& [name, t] : model.state_dict()) model_keys.insert(name);
  std::unordered_set<std::string> buffer_names;
  for (auto& [name, t] : model.named_buffers()) buffer_names.insert(name);
  std::set<std::string> loaded;

  TempDir state_dict_folder;
  io::OffloadIndex state_dict_index;
  if (o.offload_state_dict)
    state_dict_folder.path = make_temp_dir(o.offload_folder.value_or(std::filesystem::temp_directory_path()));

  LoadProgress progress;
  progress.shard_count = files.shards.size();
  if (o.on_progress)
    for (const auto& shard : files.shards) progress.bytes_total += std::filesystem::file_size(shard);

  for (const auto& shard : files.shards) {
    ++progress.shard_index;
    progress.shard_name = shard.filename().string();
    progress.tensors_done = 0;
    const bool safetensors = io::checkpoint_file_format(shard) == io::CheckpointFormat::Safetensors;
    io::StateDict sd = io::load_state_dict(shard);  // safetensors: zero-copy views; cast per tensor below
    std::vector<std::string> unexpected;
    for (const auto& [name, t] : sd)
      if (!model_keys.count(name)) unexpected.push_back(name);
    if (o.strict && !unexpected.empty())
      throw Error("checkpoint tensors not in the model: " + list_for_error(unexpected), shard.string(),
                  "is this checkpoint for this architecture? (strict loading)");
    result.unexpected_keys.insert(result.unexpected_keys.end(), unexpected.begin(), unexpected.end());
    progress.tensors_in_shard = sd.size();

    for (const auto& [name, value] : sd) {
      if (!model_keys.count(name)) continue;
      Device device = Device::cpu();
      if (map) {
        auto d = map->device_for(name);
        if (!d) throw Error("no device set for this tensor in the device map", name, "add its module (or \"\") to the map");
        device = *d;
      } else {
        Device current = nn::get_module_tensor(model, name).device();
        device = current.is_meta() ? Device::cpu() : current;
      }
      std::optional<DType> new_dtype;
      if (o.dtype && is_floating_point(value.dtype())) {
        new_dtype = o.dtype;
        if ((*o.dtype == DType::F16 || *o.dtype == DType::BF16) && keep_in_fp32(name, o.keep_in_fp32_modules))
          new_dtype = DType::F32;
      }
      const DType slot = nn::get_module_tensor(model, name).dtype();
      if (is_quantized(slot)) new_dtype = slot;  // a quantized slot (quantize_weights) keeps its dtype
      const DType stored = new_dtype.value_or(slot);
      const DType target = is_floating_point(value.dtype()) ? stored : value.dtype();
      if (device.is_disk() && (o.offload_buffers || !buffer_names.count(name))) {
        nn::set_module_tensor_to_device(model, name, Device::meta(), {}, target);
        if (safetensors && value.dtype() == target) {
          // Served from the checkpoint itself: nothing is copied (DESIGN.md, big_modeling 16).
          io::OffloadEntry e;
          e.safetensors_file = std::filesystem::absolute(shard).string();
          e.weight_name = name;
          e.dtype = target;
          result.offload_index[name] = std::move(e);
        } else {
          // Written once in the dtype it will be used in (Accelerate writes the checkpoint dtype and casts on
          // every load).
          io::offload_weight(value.to(target), name, need_offload_folder(name), result.offload_index);
        }
      } else if (device.is_disk()) {
        nn::set_module_tensor_to_device(model, name, Device::cpu(), value, new_dtype);  // a disk module's buffer
      } else if (device.is_cpu() && o.offload_state_dict && !(safetensors && value.dtype() == target)) {
        // Staged through a temporary folder to bound peak RAM. A same-dtype safetensors weight needs no staging:
        // it is a view of the mapped file, not an allocation.
        nn::set_module_tensor_to_device(model, name, Device::meta(), {}, target);
        io::offload_weight(value.to(target), name, state_dict_folder.path, state_dict_index);
      } else {
        nn::set_module_tensor_to_device(model, name, device, value, new_dtype);
      }
      loaded.insert(name);
      result.bytes_read += value.nbytes();
      progress.bytes_done += value.nbytes();
      ++progress.tensors_done;
      if (o.on_progress) o.on_progress(progress);
    }
  }

  // A tied name counts as loaded when its partner was (a checkpoint stores a tied weight once).
  std::set<const nn::TensorSlot*> loaded_slots;
  for (const auto& name : loaded)
    if (auto slot = nn::find_tensor_slot(model, name)) loaded_slots.insert(slot.get());
  for (const auto& name : model_keys) {
    if (loaded.count(name)) continue;
    auto slot = nn::find_tensor_slot(model, name);
    if (!slot || !loaded_slots.count(slot.get())) result.missing_keys.push_back(name);
  }
  std::sort(result.missing_keys.begin(), result.missing_keys.end());
  if (!result.unexpected_keys.empty())
    log_warning("Some weights of the checkpoint at {} were not used when initializing {}: {}", checkpoint.string(),
                model.type_name(), list_for_error(result.unexpected_keys));
  if (!result.missing_keys.empty()) {
    std::string msg = "weights missing from the checkpoint (left uninitialised): " + list_for_error(result.missing_keys);
    if (o.strict) throw Error(msg, checkpoint.string(), "is this checkpoint complete and for this model?");
    log_warning("{}: {}", checkpoint.string(), msg);
  }

  if (has_disk && o.offload_folder) io::save_offload_index(result.offload_index, *o.offload_folder);
  for (const auto& [name, entry] : state_dict_index) {
    Tensor parked = io::load_offloaded_weight(state_dict_folder.path / (name + ".dat"), entry);
    nn::set_module_tensor_to_device(model, name, Device::cpu(), parked.clone());
  }
  return result;
}

LoadAndDispatchResult load_checkpoint_and_dispatch(nn::Module& model, const std::filesystem::path& checkpoint,
                                                   const LoadAndDispatchOptions& o) {
  LoadAndDispatchResult result;
  std::optional<DeviceMap> map;
  io::OffloadIo offload_io = o.offload_io;
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
