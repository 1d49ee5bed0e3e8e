// AlignDevicesHook (see include/ferry/big_modeling/align_devices_hook.h), after Accelerate's hooks.py.
#include "ferry/big_modeling/align_devices_hook.h"

#include "ferry/core/error.h"
#include "ferry/core/logging.h"

namespace ferry {

AlignDevicesHook::AlignDevicesHook(AlignDevicesOptions options) : opts_(std::move(options)) {}

AlignDevicesHook::~AlignDevicesHook() {
  if (opts_.prefetcher) opts_.prefetcher->remove(this);
}

std::vector<std::string> AlignDevicesHook::offloaded_names(const nn::Module& module) const {
  std::vector<std::string> out;
  for (auto& [name, t] : nn::named_module_tensors(module, opts_.offload_buffers, opts_.place_submodules,
                                                  /*remove_non_persistent=*/true))
    out.push_back(name);
  return out;
}

void AlignDevicesHook::init_hook(nn::Module& module) {
  // On meta, every data pointer is null: tied-weight bookkeeping would conflate unrelated tensors.
  if (opts_.execution_device && opts_.execution_device->is_meta()) opts_.tied_params_map = nullptr;
  const bool recurse = opts_.place_submodules;

  if (!opts_.offload) {
    if (opts_.execution_device)
      for (auto& [name, t] : nn::named_module_tensors(module, true, recurse))
        nn::set_module_tensor_to_device(module, name, *opts_.execution_device, {}, std::nullopt,
                                        opts_.tied_params_map.get());
    return;
  }

  original_devices_.clear();
  for (auto& [name, t] : nn::named_module_tensors(module, true, recurse)) original_devices_.emplace(name, t.device());
  if (!opts_.weights_map) {
    io::StateDict copies;
    for (auto& [name, t] : nn::named_module_tensors(module, opts_.offload_buffers, recurse))
      copies.set(name, t.to(Device::cpu()));
    if (!copies.empty()) opts_.weights_map = std::make_shared<io::OffloadedWeightsLoader>(std::move(copies));
  }
  for (auto& [name, t] : nn::named_module_tensors(module, opts_.offload_buffers, recurse, true)) {
    if (opts_.tied_params_map && opts_.tied_params_map->count(nn::tensor_data_ptr(t))) tied_params_names_.insert(name);
    nn::set_module_tensor_to_device(module, name, Device::meta());
  }
  if (opts_.prefetcher && opts_.weights_map) opts_.prefetcher->add(this, opts_.weights_map, offloaded_names(module));
  if (!opts_.execution_device) return;
  if (!opts_.offload_buffers) {
    for (auto& [name, t] : module.named_buffers(recurse))
      nn::set_module_tensor_to_device(module, name, *opts_.execution_device, {}, std::nullopt,
                                      opts_.tied_params_map.get());
  } else {
    for (const auto& name : nn::get_non_persistent_buffers(module, recurse, /*fqns=*/true))
      nn::set_module_tensor_to_device(module, name, *opts_.execution_device, {}, std::nullopt,
                                      opts_.tied_params_map.get());
  }
}

void AlignDevicesHook::will_run_soon(nn::Module&) {
  if (opts_.offload && opts_.prefetcher) opts_.prefetcher->announce(this);
}

void AlignDevicesHook::may_run_soon(nn::Module&) {
  if (opts_.offload && opts_.prefetcher) opts_.prefetcher->announce(this, /*guess=*/true);
}

nn::Args AlignDevicesHook::pre_forward(nn::Module& module, nn::Args args) {
  if (opts_.io_same_device) input_device_ = nn::find_device(args);
  const Device exec = opts_.execution_device.value_or(Device::cpu());
  if (opts_.offload) {
    if (!opts_.execution_device)
      throw Error("an offloading AlignDevicesHook needs an execution_device", module.type_name());
    // First, so the next modules' reads start while this one's weights are materialised and it computes.
    if (opts_.prefetcher) opts_.prefetcher->will_run(this);
    tied_pointers_to_remove_.clear();
    auto* tied = opts_.tied_params_map.get();
    for (const auto& name : offloaded_names(module)) {
      Tensor value = opts_.weights_map->get(name);
      const void* ptr = nn::tensor_data_ptr(value);
      // Disk-backed values may come back at a new address each call, so tied entries are keyed on the fly.
      if (tied && tied_params_names_.count(name) && !tied->count(ptr)) (*tied)[ptr] = {};
      if (tied && tied->count(ptr) && !tied->at(ptr).count(exec)) tied_pointers_to_remove_.emplace_back(ptr, exec);
      nn::set_module_tensor_to_device(module, name, exec, value, std::nullopt, tied);
    }
  }
  if (!opts_.execution_device) return args;
  return nn::send_to_device(args, exec, opts_.skip_keys);
}

void AlignDevicesHook::offload_to_meta(nn::Module& module) {
  for (const auto& name : offloaded_names(module)) nn::set_module_tensor_to_device(module, name, Device::meta());
  if (auto* tied = opts_.tied_params_map.get()) {
    for (auto& [ptr, device] : tied_pointers_to_remove_) {
      auto it = tied->find(ptr);
      if (it != tied->end()) it->second.erase(device);
    }
  }
  tied_pointers_to_remove_.clear();
}

nn::Value AlignDevicesHook::post_forward(nn::Module& module, nn::Value output) {
  if (opts_.offload) offload_to_meta(module);
  if (opts_.offload && opts_.prefetcher) opts_.prefetcher->has_run(this);
  if (opts_.io_same_device && input_device_) output = nn::send_to_device(output, *input_device_, opts_.skip_keys);
  return output;
}

void AlignDevicesHook::forward_failed(nn::Module& module) noexcept {
  if (!opts_.offload) return;
  try {
    offload_to_meta(module);
  } catch (const std::exception& e) {
    log_warning("AlignDevicesHook: could not return offloaded weights of {} to meta: {}", module.type_name(), e.what());
  }
}

void AlignDevicesHook::detach_hook(nn::Module& module) {
  if (!opts_.offload) return;
  if (opts_.prefetcher) opts_.prefetcher->remove(this);
  for (const auto& [name, device] : original_devices_) {
    if (device.is_meta()) continue;
    Tensor value = opts_.weights_map && opts_.weights_map->contains(name) ? opts_.weights_map->get(name) : Tensor{};
    nn::set_module_tensor_to_device(module, name, device, value);
  }
}

std::string AlignDevicesHook::describe() const {
  return "AlignDevicesHook(execution_device=" + (opts_.execution_device ? opts_.execution_device->str() : "None") +
         ", offload=" + (opts_.offload ? "true" : "false") + ", io_same_device=" +
         (opts_.io_same_device ? "true" : "false") + ", offload_buffers=" + (opts_.offload_buffers ? "true" : "false") +
         ", place_submodules=" + (opts_.place_submodules ? "true" : "false") + ")";
}

}  // namespace ferry
