// cpu_offload, disk_offload, cpu_offload_with_hook (see include/ferry/big_modeling/cpu_offload.h).
#include "ferry/big_modeling/cpu_offload.h"
#include "ferry/big_modeling/device_staging.h"

#include "ferry/big_modeling/align_devices_hook.h"
#include "ferry/big_modeling/attach.h"
#include "ferry/big_modeling/offload_plan.h"
#include "ferry/big_modeling/tied_weights.h"
#include "ferry/core/error.h"
#include "ferry/io/checkpoint.h"
#include "ferry/io/offload.h"

namespace ferry {
namespace {

Device default_execution_device(const nn::Module& model, std::optional<Device> requested) {
  if (requested) return *requested;
  auto d = nn::first_parameter_device(model);
  return d && !d->is_meta() ? *d : Device::cpu();
}

void attach_whole_model(nn::Module& model, Device exec, bool offload_buffers,
                        std::shared_ptr<const io::WeightsMap> weights_map, const std::vector<std::string>& preload,
                        std::shared_ptr<Prefetcher> prefetcher = nullptr) {
  AlignDevicesOptions root;
  root.io_same_device = true;
  nn::add_hook_to_module(model, std::make_shared<AlignDevicesHook>(root), /*append=*/true);
  AttachOptions opts;
  opts.preload_module_classes = preload;
  const bool prefetching = prefetcher != nullptr;
  opts.prefetcher = std::move(prefetcher);
  attach_align_device_hook(
      model, exec, /*offload=*/true,
      stage_on_execution_device(with_tied_names(model, std::move(weights_map)), exec, prefetching), offload_buffers,
      "", opts);
}

bool has_meta_tensor(const nn::Module& model) {
  for (const auto& [name, t] : model.state_dict())
    if (t.is_meta()) return true;
  return false;
}

// An offload index whose entries point into the safetensors shards of a checkpoint folder: nothing is copied.
std::optional<io::OffloadIndex> index_from_safetensors_checkpoint(const std::filesystem::path& dir) {
  if (!std::filesystem::exists(dir / "model.safetensors") &&
      !std::filesystem::exists(dir / "model.safetensors.index.json"))
    return std::nullopt;
  io::CheckpointFiles files = io::get_checkpoint_shard_files(dir);
  io::OffloadIndex index;
  for (const auto& shard : files.shards) {
    io::SafetensorsFile f = io::SafetensorsFile::open(shard);
    for (const auto& name : f.keys()) {
      io::OffloadEntry e;
      e.safetensors_file = shard.string();
      e.weight_name = name;
      index.emplace(name, std::move(e));
    }
  }
  return index;
}

}  // namespace

nn::Module& cpu_offload(nn::Module& model, std::optional<Device> execution_device, bool offload_buffers,
                        std::optional<io::StateDict> state_dict, const std::vector<std::string>& preload_module_classes) {
  const Device exec = default_execution_device(model, execution_device);
  if (!state_dict) {
    if (has_meta_tensor(model))
      throw Error("cpu_offload needs the model's weights, but some are on meta", model.type_name(),
                  "load the checkpoint first, pass a state_dict, or use disk_offload with the checkpoint folder");
    state_dict.emplace();
    for (auto& [name, t] : model.state_dict()) state_dict->set(name, t.to(Device::cpu()));
  }
  attach_whole_model(model, exec, offload_buffers, std::make_shared<io::OffloadedWeightsLoader>(std::move(*state_dict)),
                     preload_module_classes);
  return model;
}

nn::Module& disk_offload(nn::Module& model, const std::filesystem::path& offload_dir,
                         std::optional<Device> execution_device, bool offload_buffers,
                         const std::vector<std::string>& preload_module_classes, int prefetch,
                         OffloadIo offload_io) {
  std::shared_ptr<Prefetcher> prefetcher = Prefetcher::create(prefetch, "disk_offload");
  std::optional<io::OffloadIndex> index;
  if (!std::filesystem::is_regular_file(offload_dir / "index.json")) {
    index = index_from_safetensors_checkpoint(offload_dir);
    if (!index) {
      if (has_meta_tensor(model))
        throw Error(ErrorKind::NotFound,
                    "the model is on meta and " + offload_dir.string() +
                        " holds neither an offload index.json nor a safetensors checkpoint",
                    "disk_offload", "point offload_dir at the folder holding the weights, or load them first");
      {
        io::StateDict sd;
        for (auto& [name, t] : model.state_dict()) sd.set(name, t);
        io::offload_state_dict(offload_dir, sd);
      }
    }
  }
  const Device exec = default_execution_device(model, execution_device);
  auto weights = std::make_shared<io::OffloadedWeightsLoader>(io::StateDict{}, offload_dir, index);
  weights->set_staged_reader(staged_reader_for(model, DeviceMap{{"", Device::disk()}}, offload_io, prefetch, 0,
                                               /*pinned=*/exec.is_cuda()));
  attach_whole_model(model, exec, offload_buffers, std::move(weights), preload_module_classes, std::move(prefetcher));
  return model;
}

void UserCpuOffloadHook::offload() { hook_->init_hook(*model_); }
void UserCpuOffloadHook::remove() { nn::remove_hook_from_module(*model_); }

std::shared_ptr<UserCpuOffloadHook> cpu_offload_with_hook(nn::Module& model, Device execution_device,
                                                          std::shared_ptr<UserCpuOffloadHook> prev_module_hook) {
  auto hook = std::make_shared<CpuOffloadHook>(execution_device, std::move(prev_module_hook));
  nn::add_hook_to_module(model, hook, /*append=*/true);
  return std::make_shared<UserCpuOffloadHook>(model, hook);
}

void CpuOffloadHook::init_hook(nn::Module& module) { module.to(Device::cpu()); }

nn::Args CpuOffloadHook::pre_forward(nn::Module& module, nn::Args args) {
  if (prev_) {
    auto prev_device = nn::first_parameter_device(prev_->model());
    if (prev_device && !prev_device->is_cpu()) prev_->offload();
  }
  if (nn::first_parameter_device(module) == execution_device_) return args;
  module.to(execution_device_);
  return nn::send_to_device(args, execution_device_);
}

}  // namespace ferry
