// dispatch_model (see include/ferry/big_modeling/dispatch.h), after Accelerate's big_modeling.py.
#include "ferry/big_modeling/dispatch.h"

#include <algorithm>
#include <map>
#include <unordered_set>

#include "ferry/big_modeling/attach.h"
#include "ferry/big_modeling/device_staging.h"
#include "ferry/big_modeling/experts.h"
#include "ferry/big_modeling/offload_plan.h"
#include "ferry/big_modeling/tied_weights.h"
#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/nn/module_tensors.h"
#include "ferry/nn/tied.h"

namespace ferry {
namespace {

// The experts on disk, behind one LRU cache (DispatchOptions::expert_cache) in groups of a layer's experts.
std::shared_ptr<const io::WeightsMap> cache_disk_experts(const nn::Module& model, const DeviceMap& device_map,
                                                         std::shared_ptr<const io::WeightsMap> inner,
                                                         ExpertCache& cache) {
  auto on_disk = std::make_shared<std::unordered_set<std::string>>();
  for (const std::string& expert : expert_module_names(model, cache.classes))
    if (const auto d = device_map.device_for(expert); d && d->is_disk()) on_disk->insert(expert);
  if (on_disk->empty()) return inner;
  // "<layer>.experts.K.w1.weight" -> "<layer>.experts.K": an expert's tensor is at most a few components below it.
  auto expert_of = [on_disk](const std::string& key) {
    std::string prefix = key;
    for (int up = 0; up < 3; ++up) {
      const std::size_t dot = prefix.rfind('.');
      if (dot == std::string::npos) break;
      prefix.resize(dot);
      if (on_disk->count(prefix)) return prefix;
    }
    return std::string();
  };
  cache.map = std::make_shared<io::CachedWeightsMap>(
      std::move(inner), cache.capacity_bytes, [expert_of](const std::string& key) { return !expert_of(key).empty(); },
      [expert_of](const std::string& key) {  // the layer's list of experts
        const std::string expert = expert_of(key);
        return expert.substr(0, expert.rfind('.'));
      });
  return cache.map;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + (n.empty() ? std::string("\"\"") : n);
  return out;
}

io::StateDict model_state_dict(const nn::Module& model) {
  io::StateDict sd;
  for (auto& [name, t] : model.state_dict()) sd.set(name, t);
  return sd;
}

// Accelerate wraps model.to: moving a dispatched model raises when some weights are offloaded (they live on
// meta) and warns otherwise.
void guard_moves(nn::Module& model) {
  model.set_move_guard([](const nn::Module& m, Device) {
    for (const auto& [name, t] : m.named_parameters())
      if (t.is_meta())
        throw Error("cannot move a model that has modules offloaded to cpu or disk (" + name + " is on meta)", "",
                    "remove the hooks first (remove_hook_from_module(model, true)) or dispatch it again");
    log_warning("You shouldn't move a model that is dispatched using ferry hooks.");
  });
}

// The cpu-placed weights copied into pinned host memory, tensors sharing bytes (tied) copied once.
io::StateDict pinned_copies(const io::StateDict& state_dict) {
  io::StateDict out;
  std::map<std::pair<const void*, std::size_t>, Tensor> done;
  for (const auto& [name, t] : state_dict) {
    if (!t.defined() || t.is_meta() || !t.device().is_cpu() || t.nbytes() == 0) {
      out.set(name, t);
      continue;
    }
    auto key = std::make_pair(static_cast<const void*>(t.storage().get()), t.byte_offset());
    auto it = done.find(key);
    if (it == done.end() || it->second.shape() != t.shape() || it->second.dtype() != t.dtype()) {
      Tensor pinned = Tensor::from_storage(allocate_pinned_host(t.nbytes()), 0, t.shape(), t.dtype());
      pinned.copy_from(t);
      it = done.insert_or_assign(key, pinned).first;
    }
    out.set(name, it->second);
  }
  return out;
}

}  // namespace

io::StateDict extract_submodules_state_dict(const io::StateDict& state_dict, const std::vector<std::string>& module_names) {
  io::StateDict out;
  for (const auto& [name, t] : state_dict)
    if (std::any_of(module_names.begin(), module_names.end(), [&](const std::string& m) { return module_covers(m, name); }))
      out.set(name, t);
  return out;
}

// Entries nested inside other entries ({"model": cpu, "model.layers.1": disk}) are not supported (nor are they
// by Accelerate); tied parameters split between an offloaded and a resident entry would share one slot that the
// offloaded side puts on meta. Both are refused up front with the names, instead of failing later on meta.
static void check_dispatchable(const nn::Module& model, const DeviceMap& device_map, Device main) {
  for (const auto& [outer, d1] : device_map)
    for (const auto& [inner, d2] : device_map)
      if (outer != inner && module_covers(outer, inner))
        throw Error("device map entry \"" + inner + "\" is nested inside entry \"" + outer + "\"", "dispatch_model",
                    "give each module one entry: list the siblings of \"" + inner + "\" instead of their parent");
  auto offloaded = [&](const std::string& name) {
    Device d = *device_map.device_for(name);
    return d.is_disk() || (d.is_cpu() && !main.is_cpu());
  };
  for (const auto& group : nn::find_tied_parameters(model)) {
    for (const auto& name : group)
      if (offloaded(name) != offloaded(group.front()))
        throw Error("tied parameters " + group.front() + " and " + name +
                        " are mapped to different tiers (one offloaded, one resident)",
                    "dispatch_model", "put both in the same device-map entry or on the same device");
  }
}

void dispatch_model(nn::Module& model, const DeviceMap& device_map, const DispatchOptions& options) {
  std::shared_ptr<Prefetcher> prefetcher =  // checked first
      options.prefetcher ? options.prefetcher : Prefetcher::create(options.prefetch, "dispatch_model");
  check_device_map(model, device_map);  // error early if the map is incomplete
  const std::vector<Device> devices = device_map.devices();
  const bool has_disk = std::any_of(devices.begin(), devices.end(), [](Device d) { return d.is_disk(); });

  if (devices.size() <= 1 && !has_disk && !options.force_hooks) {
    if (!devices.empty()) model.to(devices.front());
    return;
  }

  Device main = Device::cpu();
  if (options.main_device) {
    main = *options.main_device;
  } else {
    for (Device d : devices)
      if (!d.is_cpu() && !d.is_disk()) {
        main = d;
        break;
      }
  }

  check_dispatchable(model, device_map, main);

  std::vector<std::string> cpu_modules, disk_modules;
  for (const auto& [name, d] : device_map) {
    if (d.is_cpu()) cpu_modules.push_back(name);
    if (d.is_disk()) disk_modules.push_back(name);
  }
  std::optional<io::StateDict> state_dict = options.state_dict;
  if (!main.is_cpu() && !state_dict && !cpu_modules.empty())
    state_dict = extract_submodules_state_dict(model_state_dict(model), cpu_modules);
  if (state_dict && main.is_cuda() && options.pin_cpu_weights) state_dict = pinned_copies(*state_dict);

  if (!disk_modules.empty() && !options.offload_dir && !options.offload_index)
    throw Error("an offload_dir is needed to dispatch this model according to this device_map; these submodules go "
                "to disk: " + join(disk_modules),
                "dispatch_model", "pass offload_dir (a writable folder) or an offload_index");
  if (!disk_modules.empty() && !options.offload_index &&
      !std::filesystem::is_regular_file(*options.offload_dir / "index.json"))
    io::offload_state_dict(*options.offload_dir, extract_submodules_state_dict(model_state_dict(model), disk_modules));

  std::map<std::string, Device> execution_device;
  std::map<std::string, bool> offload;
  for (const auto& [name, d] : device_map) {
    execution_device[name] = (d.is_cpu() || d.is_disk()) ? main : d;
    offload[name] = d.is_disk() || (d.is_cpu() && !main.is_cpu());
  }
  execution_device[""] = main;

  std::shared_ptr<const io::WeightsMap> weights_map;
  std::optional<std::filesystem::path> save_folder;
  if (!disk_modules.empty()) save_folder = options.offload_dir;
  if (state_dict || save_folder || options.offload_index) {
    auto loader = std::make_shared<io::OffloadedWeightsLoader>(state_dict.value_or(io::StateDict{}), save_folder,
                                                              options.offload_index);
    // Disk reads: page-cache views, or O_DIRECT into a staging pool when RAM cannot cache the disk part.
    std::shared_ptr<io::StagedReader> reader = options.staged_reader;
    if (!reader && has_disk)
      reader = staged_reader_for(model, device_map, options.offload_io, options.prefetch, options.staging_bytes,
                                 /*pinned=*/main.is_cuda());
    if (has_disk) loader->set_staged_reader(std::move(reader));
    weights_map = std::move(loader);
    if (options.expert_cache && has_disk)
      weights_map = cache_disk_experts(model, device_map, weights_map, *options.expert_cache);
  }
  // A tied weight is stored once (lm_head.weight usually not at all): every name of its group reads the stored one.
  weights_map = with_tied_names(model, std::move(weights_map));
  // Executing on a GPU with a prefetcher: the weights read ahead are also copied ahead, on the copy stream.
  weights_map = stage_on_execution_device(std::move(weights_map), main, prefetcher != nullptr);

  // Tied weights materialised once per device: keyed by the data pointer of each tied tensor that has bytes.
  AttachOptions attach;
  attach.skip_keys = options.skip_keys;
  attach.preload_module_classes = options.preload_module_classes;
  attach.tied_params_map = std::make_shared<nn::TiedParamsMap>();
  for (const auto& group : nn::find_tied_parameters(model))
    for (const auto& name : group) {
      const Tensor& t = nn::get_module_tensor(model, name);
      if (!t.is_meta()) (*attach.tied_params_map)[nn::tensor_data_ptr(t)];
    }

  attach.prefetcher = std::move(prefetcher);  // offloading hooks register with it; without any it stays idle
  attach_align_device_hook_on_blocks(model, execution_device, offload, weights_map, options.offload_buffers, "", attach);

  std::vector<std::string> offloaded_to;
  if (std::any_of(devices.begin(), devices.end(), [](Device d) { return d.is_cpu(); }) && !main.is_cpu())
    offloaded_to.push_back("cpu");
  if (has_disk) offloaded_to.push_back("disk");
  if (!offloaded_to.empty())
    log_warning("Some parameters are on the meta device because they were offloaded to the {}.",
                offloaded_to.size() == 2 ? "cpu and disk" : offloaded_to.front());
  guard_moves(model);
}

}  // namespace ferry

namespace ferry {

io::StateDict get_state_dict_offloaded_model(nn::Module& model) {
  io::StateDict out;
  for (auto& [name, t] : model.state_dict()) out.set(name, t.is_meta() ? t : t.to(Device::cpu()));
  for (const auto& [prefix, module] : model.named_modules()) {
    if (!has_offloaded_params(*module)) continue;
    auto scope = align_module_device(*module, Device::cpu());
    const bool recurse = find_align_devices_hook(*module)->options().place_submodules;
    for (auto& [name, t] : nn::named_module_tensors(*module, true, recurse)) {
      std::string full = prefix.empty() ? name : prefix + "." + name;
      if (out.contains(full)) out.set(full, t.to(Device::cpu()).clone());
    }
  }
  return out;
}

}  // namespace ferry
