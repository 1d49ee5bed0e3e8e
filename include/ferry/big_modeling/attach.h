// Attaching AlignDevicesHooks over a module tree, after Accelerate's hooks.py helpers, plus the small helpers
// built on them (has_offloaded_params, align_module_device).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/big_modeling/align_devices_hook.h"

namespace ferry {

/// Common options of the attach functions.
struct AttachOptions {
  std::vector<std::string> skip_keys;
  /// Classes (type_name()) whose instances load their whole subtree's weights at the start of their forward
  /// (for modules that use a child's weights without calling the child).
  std::vector<std::string> preload_module_classes;
  std::shared_ptr<nn::TiedParamsMap> tied_params_map;
  /// Given to every offloading hook (see AlignDevicesOptions::prefetcher).
  std::shared_ptr<Prefetcher> prefetcher;
};

/// Gives every module that has tensors and no hook yet a plain AlignDevicesHook(execution_device), recursing
/// into children but not below a preload class.
/// Accelerate: attach_execution_device_hook
void attach_execution_device_hook(nn::Module& module, Device execution_device, const AttachOptions& options = {});

/// Appends an AlignDevicesHook to every module with direct tensors (a preload class: one hook for its whole
/// subtree), each with the part of `weights_map` under its dotted name.
/// Accelerate: attach_align_device_hook
void attach_align_device_hook(nn::Module& module, std::optional<Device> execution_device, bool offload,
                              std::shared_ptr<const io::WeightsMap> weights_map, bool offload_buffers,
                              const std::string& module_name = "", const AttachOptions& options = {});

/// Per-block placement for dispatch_model: `execution_device` and `offload` give, per device-map key, where the
/// block runs and whether its weights are offloaded. A resident block gets one place_submodules hook; an
/// offloaded block gets per-module offload hooks; the root gets io_same_device.
/// Accelerate: attach_align_device_hook_on_blocks
void attach_align_device_hook_on_blocks(nn::Module& module, const std::map<std::string, Device>& execution_device,
                                        const std::map<std::string, bool>& offload,
                                        std::shared_ptr<const io::WeightsMap> weights_map, bool offload_buffers,
                                        const std::string& module_name = "", const AttachOptions& options = {});

/// True when the module's hook (or one of a SequentialHook's) is an AlignDevicesHook with offload.
/// Accelerate: has_offloaded_params
bool has_offloaded_params(const nn::Module& module);

/// Scope guard: while alive, an offloaded module's weights are materialised on its execution device (or on
/// `device` when given); a plain module is moved to `device` and moved back after.
///   { auto scope = align_module_device(layer); read(layer.parameter("weight")); }
/// Accelerate: align_module_device
class [[nodiscard]] AlignModuleDevice {
 public:
  AlignModuleDevice(nn::Module& module, std::optional<Device> device);
  ~AlignModuleDevice();
  AlignModuleDevice(const AlignModuleDevice&) = delete;
  AlignModuleDevice& operator=(const AlignModuleDevice&) = delete;

 private:
  nn::Module& module_;
  std::shared_ptr<AlignDevicesHook> hook_;
  bool overrode_device_ = false;
  std::optional<Device> saved_execution_device_;
  std::vector<std::pair<std::string, Device>> moved_;
};
AlignModuleDevice align_module_device(nn::Module& module, std::optional<Device> device = std::nullopt);

/// The AlignDevicesHook on `module` (directly or inside a SequentialHook), or nullptr.
std::shared_ptr<AlignDevicesHook> find_align_devices_hook(const nn::Module& module);

}  // namespace ferry
