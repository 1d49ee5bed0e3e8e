// Attaching AlignDevicesHooks over a tree; has_offloaded_params; align_module_device
// (see include/ferry/big_modeling/attach.h). Follows Accelerate's hooks.py function by function.
#include "ferry/big_modeling/attach.h"

#include <algorithm>

#include "ferry/nn/module_tensors.h"

namespace ferry {
namespace {

bool is_preload_class(const nn::Module& m, const AttachOptions& o) {
  return std::find(o.preload_module_classes.begin(), o.preload_module_classes.end(), m.type_name()) !=
         o.preload_module_classes.end();
}

std::string child_path(const std::string& parent, const std::string& child) {
  return parent.empty() ? child : parent + "." + child;
}

AlignDevicesOptions base_options(std::optional<Device> device, const AttachOptions& o) {
  AlignDevicesOptions a;
  a.execution_device = device;
  a.skip_keys = o.skip_keys;
  a.tied_params_map = o.tied_params_map;
  a.prefetcher = o.prefetcher;
  return a;
}

}  // namespace

std::shared_ptr<AlignDevicesHook> find_align_devices_hook(const nn::Module& module) {
  const auto& hook = module.hook();
  if (auto h = std::dynamic_pointer_cast<AlignDevicesHook>(hook)) return h;
  if (auto seq = std::dynamic_pointer_cast<nn::SequentialHook>(hook)) {
    // The offloading hook, if several: the one that matters for has_offloaded_params / align_module_device.
    std::shared_ptr<AlignDevicesHook> first;
    for (const auto& h : seq->hooks())
      if (auto a = std::dynamic_pointer_cast<AlignDevicesHook>(h)) {
        if (a->options().offload) return a;
        if (!first) first = a;
      }
    return first;
  }
  return nullptr;
}

void attach_execution_device_hook(nn::Module& module, Device execution_device, const AttachOptions& options) {
  if (!module.hook() && !module.state_dict().empty())
    nn::add_hook_to_module(module, std::make_shared<AlignDevicesHook>(base_options(execution_device, options)));
  if (is_preload_class(module, options)) return;
  for (const auto& child : module.children()) attach_execution_device_hook(*child.module, execution_device, options);
}

void attach_align_device_hook(nn::Module& module, std::optional<Device> execution_device, bool offload,
                              std::shared_ptr<const io::WeightsMap> weights_map, bool offload_buffers,
                              const std::string& module_name, const AttachOptions& options) {
  const bool has_direct = !nn::named_module_tensors(module).empty();
  const bool full_offload = offload && is_preload_class(module, options);
  if (has_direct || full_offload) {
    AlignDevicesOptions a = base_options(execution_device, options);
    a.offload = offload;
    if (weights_map) a.weights_map = module_name.empty() ? weights_map : std::make_shared<io::PrefixedDataset>(weights_map, module_name);
    a.offload_buffers = offload_buffers;
    a.place_submodules = full_offload;
    nn::add_hook_to_module(module, std::make_shared<AlignDevicesHook>(std::move(a)), /*append=*/true);
  }
  if (full_offload) return;  // the preload hook covers the whole subtree
  for (const auto& child : module.children())
    attach_align_device_hook(*child.module, execution_device, offload, weights_map, offload_buffers,
                             child_path(module_name, child.name), options);
}

void attach_align_device_hook_on_blocks(nn::Module& module, const std::map<std::string, Device>& execution_device,
                                        const std::map<std::string, bool>& offload,
                                        std::shared_ptr<const io::WeightsMap> weights_map, bool offload_buffers,
                                        const std::string& module_name, const AttachOptions& options) {
  auto dev = execution_device.find(module_name);
  auto off = offload.find(module_name);
  if (dev != execution_device.end() && off != offload.end() && !off->second) {
    AlignDevicesOptions a = base_options(dev->second, options);
    a.offload_buffers = offload_buffers;
    a.io_same_device = module_name.empty();
    a.place_submodules = true;
    nn::add_hook_to_module(module, std::make_shared<AlignDevicesHook>(std::move(a)));
    attach_execution_device_hook(module, dev->second, options);
  } else if (dev != execution_device.end() && off != offload.end()) {
    attach_align_device_hook(module, dev->second, true, weights_map, offload_buffers, module_name, options);
    if (!module.hook()) {
      AlignDevicesOptions a = base_options(dev->second, options);
      a.io_same_device = module_name.empty();
      nn::add_hook_to_module(module, std::make_shared<AlignDevicesHook>(std::move(a)));
    }
    attach_execution_device_hook(module, dev->second, options);
  } else if (module_name.empty()) {
    auto root = execution_device.find("");
    AlignDevicesOptions a =
        base_options(root == execution_device.end() ? std::nullopt : std::optional<Device>(root->second), options);
    a.io_same_device = true;
    nn::add_hook_to_module(module, std::make_shared<AlignDevicesHook>(std::move(a)));
  }
  for (const auto& child : module.children())
    attach_align_device_hook_on_blocks(*child.module, execution_device, offload, weights_map, offload_buffers,
                                       child_path(module_name, child.name), options);
}

bool has_offloaded_params(const nn::Module& module) {
  auto h = find_align_devices_hook(module);
  return h && h->options().offload;
}

AlignModuleDevice::AlignModuleDevice(nn::Module& module, std::optional<Device> device) : module_(module) {
  if (has_offloaded_params(module)) {
    hook_ = find_align_devices_hook(module);
    if (device) {
      overrode_device_ = true;
      saved_execution_device_ = hook_->options().execution_device;
      hook_->set_execution_device(device);
    }
    try {
      hook_->pre_forward(module, {});
    } catch (...) {
      hook_->forward_failed(module);
      if (device) hook_->set_execution_device(saved_execution_device_);
      throw;
    }
  } else if (device) {
    for (auto& [name, t] : module.named_parameters(/*recurse=*/false)) {
      moved_.emplace_back(name, t.device());
      nn::set_module_tensor_to_device(module, name, *device);
    }
  }
}

AlignModuleDevice::~AlignModuleDevice() {
  if (hook_) {
    try {
      hook_->post_forward(module_, {});
    } catch (...) {
      hook_->forward_failed(module_);
    }
    if (overrode_device_) hook_->set_execution_device(saved_execution_device_);
    return;
  }
  for (auto& [name, device] : moved_) {
    try {
      nn::set_module_tensor_to_device(module_, name, device);
    } catch (...) {
      // A destructor must not throw; the tensor stays where it is.
    }
  }
}

AlignModuleDevice align_module_device(nn::Module& module, std::optional<Device> device) {
  return AlignModuleDevice(module, device);
}

}  // namespace ferry
