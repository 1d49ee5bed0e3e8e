// AlignDevicesHook (see include/ferry/big_modeling/align_devices_hook.h), after Accelerate's hooks.py.
#include "ferry/big_modeling/align_devices_hook.h"

#include <algorithm>

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

std::vector<std::string> AlignDevicesHook::prefetched_names(const nn::Module& module) const {
  std::vector<std::string> out = offloaded_names(module);
  const std::string_view table = module.row_lookup_parameter();
  if (!table.empty()) out.erase(std::remove(out.begin(), out.end(), table), out.end());
  return out;
}

bool AlignDevicesHook::materialise_rows(nn::Module& module, nn::Args& args, Device exec) {
  const std::string name(module.row_lookup_parameter());
  if (name.empty() || !module.has_parameter(name)) return false;
  nn::Value* ids_value = module.row_lookup_ids(args);
  const std::shared_ptr<nn::TensorSlot>& slot = module.parameter_slot(name);
  if (ids_value == nullptr || !slot->tensor.is_meta() || slot->tensor.dim() < 1) return false;
  const Tensor ids = ids_value->tensor().to(Device::cpu());
  if (ids.dtype() != DType::I64 && ids.dtype() != DType::I32) return false;
  const int64_t vocab = slot->tensor.size(0);
  std::vector<int64_t> rows(static_cast<std::size_t>(ids.numel()));
  for (int64_t i = 0; i < ids.numel(); ++i) {
    rows[static_cast<std::size_t>(i)] = ids.dtype() == DType::I64 ? ids.data<int64_t>()[i] : ids.data<int32_t>()[i];
    if (rows[static_cast<std::size_t>(i)] < 0 || rows[static_cast<std::size_t>(i)] >= vocab) return false;
  }
  std::vector<int64_t> table_rows = rows;
  std::sort(table_rows.begin(), table_rows.end());
  table_rows.erase(std::unique(table_rows.begin(), table_rows.end()), table_rows.end());
  Tensor table = opts_.weights_map->get_rows(name, table_rows).to(exec);
  Tensor renumbered = Tensor::empty(ids.shape(), DType::I64);
  for (std::size_t i = 0; i < rows.size(); ++i)
    renumbered.data<int64_t>()[i] = std::lower_bound(table_rows.begin(), table_rows.end(), rows[i]) -
                                    table_rows.begin();
  *ids_value = nn::Value(renumbered);
  row_table_meta_ = slot->tensor;
  slot->tensor = std::move(table);
  return true;
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
  if (opts_.prefetcher && opts_.weights_map) opts_.prefetcher->add(this, opts_.weights_map, prefetched_names(module));
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
    const bool rows = materialise_rows(module, args, exec);
    for (const auto& name : offloaded_names(module)) {
      if (rows && name == module.row_lookup_parameter()) continue;
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
  if (row_table_meta_.defined()) {
    module.parameter_slot(module.row_lookup_parameter())->tensor = std::move(row_table_meta_);
    row_table_meta_ = Tensor();
  }
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
