// Whole-model offload: cpu_offload and disk_offload (every weight offloaded, brought to the execution device
// module by module), and cpu_offload_with_hook (the whole model moves to the device when it runs and stays
// there until offloaded, for pipelines of several models).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/big_modeling/offload_io.h"
#include "ferry/big_modeling/prefetch.h"
#include "ferry/io/staged_reader.h"
#include "ferry/io/state_dict.h"
#include "ferry/nn/hooks.h"

namespace ferry {

/// Keeps one copy of the model's weights in RAM (`state_dict`, default: cpu copies of model.state_dict())
/// and materialises each module's weights on `execution_device` (default: the device of the first parameter)
/// only for its forward. Returns the model.
/// Accelerate: cpu_offload(model, execution_device, offload_buffers, state_dict, preload_module_classes)
nn::Module& cpu_offload(nn::Module& model, std::optional<Device> execution_device = std::nullopt,
                        bool offload_buffers = false, std::optional<io::StateDict> state_dict = std::nullopt,
                        const std::vector<std::string>& preload_module_classes = {});

/// Serves the weights from an offload folder: if `offload_dir` has no index.json the model's state dict is
/// written there first (atomically). Works for a model built empty (meta) whose weights are already in the
/// folder — or, when the folder holds a safetensors checkpoint instead (model.safetensors or
/// model.safetensors.index.json), straight from those shards, copying nothing. A meta model with neither is an
/// error that says so (Accelerate fails with "Cannot copy out of meta tensor", #2129).
/// Beyond Accelerate: `prefetch` modules ahead are read while one computes (big_modeling/prefetch.h; kPrefetchAuto:
/// measured per run); 0 reads
/// each module's weights when it starts, as Accelerate does. `offload_io` chooses page-cache views or O_DIRECT reads
/// into a staging pool (DispatchOptions::offload_io; Auto decides by the folder's size against cacheable RAM).
/// Accelerate: disk_offload(model, offload_dir, execution_device, offload_buffers, preload_module_classes)
nn::Module& disk_offload(nn::Module& model, const std::filesystem::path& offload_dir,
                         std::optional<Device> execution_device = std::nullopt, bool offload_buffers = false,
                         const std::vector<std::string>& preload_module_classes = {}, int prefetch = kPrefetchAuto,
                         OffloadIo offload_io = OffloadIo::Auto);

class CpuOffloadHook;

/// The handle cpu_offload_with_hook returns. Accelerate: UserCpuOffloadHook
class UserCpuOffloadHook {
 public:
  UserCpuOffloadHook(nn::Module& model, std::shared_ptr<CpuOffloadHook> hook) : model_(&model), hook_(std::move(hook)) {}
  /// Sends the model back to cpu.
  void offload();
  /// Removes the hook from the model.
  void remove();
  nn::Module& model() const noexcept { return *model_; }

 private:
  nn::Module* model_;
  std::shared_ptr<CpuOffloadHook> hook_;
};

/// Moves the model to cpu now and to `execution_device` when it runs, where it stays until `offload()`. When
/// it runs, the model of `prev_module_hook` (if any, and not already on cpu) is offloaded first.
///   auto h1 = cpu_offload_with_hook(m1, dev);  auto h2 = cpu_offload_with_hook(m2, dev, h1);
///   m1(x); m2(y);   // m1 went back to cpu just before m2 ran
///   h2->offload();
/// Accelerate: cpu_offload_with_hook
std::shared_ptr<UserCpuOffloadHook> cpu_offload_with_hook(nn::Module& model, Device execution_device,
                                                          std::shared_ptr<UserCpuOffloadHook> prev_module_hook = nullptr);

/// The hook behind cpu_offload_with_hook. Accelerate: CpuOffload
class CpuOffloadHook : public nn::ModelHook {
 public:
  CpuOffloadHook(Device execution_device, std::shared_ptr<UserCpuOffloadHook> prev_module_hook)
      : execution_device_(execution_device), prev_(std::move(prev_module_hook)) {}
  void init_hook(nn::Module& module) override;
  nn::Args pre_forward(nn::Module& module, nn::Args args) override;
  std::string describe() const override { return "CpuOffload(execution_device=" + execution_device_.str() + ")"; }

 private:
  Device execution_device_;
  std::shared_ptr<UserCpuOffloadHook> prev_;
};

}  // namespace ferry
