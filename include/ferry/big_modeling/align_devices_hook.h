// AlignDevicesHook: keeps a module's weights and inputs on one execution device for its forward, optionally
// offloading the weights (to meta, no bytes) between calls — the hook that makes big-model inference work.
//
// Lifecycle of an offloaded module (offload = true):
//   attach   init_hook: records each tensor's original device, builds a weights map of cpu copies when none is
//            given, puts parameters (and persistent buffers with offload_buffers) on meta; other buffers go to
//            the execution device.
//   call     pre_forward: materialises every offloaded tensor from the weights map on the execution device,
//            moves inputs there (named inputs in skip_keys stay put: a KV cache);
//            post_forward: returns them to meta, releasing the bytes; with io_same_device the output goes back
//            to the first input's device.
//   detach   detach_hook: puts tensors back on their original devices (from the weights map).
// Without offload, init_hook just moves the module's direct tensors (the whole subtree with place_submodules)
// to the execution device, and pre_forward moves inputs.
//
// Departures from Accelerate: if the forward throws, forward_failed returns offloaded weights to meta (Accelerate
// leaves them materialised); no class-name special cases (Linear8bitLt).
//
// Tables read by the row (beyond Accelerate): an offloaded module that looks rows up by id (nn::Embedding, see
// nn::Module::row_lookup_parameter) gets, for each call, a table of just the rows its ids pick, read through
// WeightsMap::get_rows, with the ids renumbered into it; its forward runs unchanged and its output is the same. An
// embedding on disk then reads a row per generated token instead of the whole table (Accelerate reads the table).
// The prefetcher never reads such a table ahead. Ids out of range, or a table a tied partner holds in memory, take
// the whole-table path (the forward then reports bad ids as it always does).
//
// Prefetching (beyond Accelerate): with a Prefetcher in the options, the hook registers its module at init_hook
// and announces each call at the start of pre_forward; the prefetcher then reads the next modules' weights through
// their weights maps while this one computes (big_modeling/prefetch.h). Without one, loading is synchronous.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ferry/big_modeling/prefetch.h"
#include "ferry/io/offload.h"
#include "ferry/nn/hooks.h"
#include "ferry/nn/module_tensors.h"

namespace ferry {

struct AlignDevicesOptions {
  /// Where inputs and weights go for the forward; nullopt = leave them where they are.
  std::optional<Device> execution_device;
  /// Offload the weights (to meta) between calls.
  bool offload = false;
  /// Return the output to the device of the first input tensor.
  bool io_same_device = false;
  /// Where offloaded weights are read from, by names relative to the hooked module. nullptr + offload: cpu
  /// copies are taken at init_hook.
  std::shared_ptr<const io::WeightsMap> weights_map;
  /// Offload persistent buffers too.
  bool offload_buffers = false;
  /// Handle the whole subtree's tensors, not only the module's direct ones.
  bool place_submodules = false;
  /// Named inputs (and output dict entries) never moved between devices, e.g. "past_key_values".
  std::vector<std::string> skip_keys;
  /// Shared by every hook of a dispatched model: tied weights materialised once per device.
  std::shared_ptr<nn::TiedParamsMap> tied_params_map;
  /// Shared by every hook of a dispatched model: reads offloaded weights ahead of their module's forward.
  /// nullptr: each module's weights are read when it starts (Accelerate's behaviour).
  std::shared_ptr<Prefetcher> prefetcher;
};

/// Accelerate: AlignDevicesHook
class AlignDevicesHook : public nn::ModelHook {
 public:
  explicit AlignDevicesHook(AlignDevicesOptions options = {});
  ~AlignDevicesHook() override;

  void init_hook(nn::Module& module) override;
  nn::Args pre_forward(nn::Module& module, nn::Args args) override;
  nn::Value post_forward(nn::Module& module, nn::Value output) override;
  void detach_hook(nn::Module& module) override;
  void forward_failed(nn::Module& module) noexcept override;
  /// The model picked this module for the data (a routed expert): its offloaded weights are read now
  /// (Prefetcher::announce).
  void will_run_soon(nn::Module& module) override;
  /// The model guesses this module may run (an expert of the next layer): read after what will run
  /// (Prefetcher::announce with guess).
  void may_run_soon(nn::Module& module) override;
  std::string describe() const override;

  const AlignDevicesOptions& options() const noexcept { return opts_; }
  /// For align_module_device(module, device): run the next calls on another device.
  void set_execution_device(std::optional<Device> device) noexcept { opts_.execution_device = device; }
  /// The names (relative to the module) this hook materialises for each call.
  std::vector<std::string> offloaded_names(const nn::Module& module) const;

 private:
  void offload_to_meta(nn::Module& module);
  /// The row path for a lookup module's table (above); false when the call takes the whole-table path.
  bool materialise_rows(nn::Module& module, nn::Args& args, Device exec);
  /// offloaded_names without a lookup module's table (what the prefetcher reads ahead).
  std::vector<std::string> prefetched_names(const nn::Module& module) const;

  AlignDevicesOptions opts_;
  std::optional<Device> input_device_;
  std::map<std::string, Device> original_devices_;
  std::set<std::string> tied_params_names_;
  std::vector<std::pair<const void*, Device>> tied_pointers_to_remove_;
  Tensor row_table_meta_;  // the table's meta tensor while a call holds its rows (defined only then)
};

}  // namespace ferry
