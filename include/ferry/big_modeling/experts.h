// Device maps of mixtures of experts (beyond Accelerate): placing experts by hand, as llama.cpp users do with
// --cpu-moe / --n-cpu-moe / --override-tensor, and what a generated token reads from each device when only the
// routed experts are read.
//
// An expert is a module of one of the model's expert classes (LanguageModelInfo::experts.expert_class, e.g.
// "MixtralBlockSparseTop2MLP"): model.layers.N.block_sparse_moe.experts.K. Planning by the expert is
// PlanOptions::expert_module_classes (auto_device_map.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/big_modeling/device_map.h"
#include "ferry/big_modeling/token_reads.h"  // per_token_reads
#include "ferry/core/dtype.h"
#include "ferry/nn/module.h"

namespace ferry {

/// The names of the expert modules of `model` (modules whose type_name() is in `expert_classes`), in module order.
std::vector<std::string> expert_module_names(const nn::Module& model, const std::vector<std::string>& expert_classes);

/// `map` with experts moved: each expert for which `where(name)` gives a device goes there; the rest of the map is
/// unchanged (entries that held experts are split down to them first; the result is cleaned, clean_device_map).
///   place_experts(model, map, {"MixtralBlockSparseTop2MLP"}, [](const std::string&) { return Device::disk(); });
DeviceMap place_experts(const nn::Module& model, const DeviceMap& map, const std::vector<std::string>& expert_classes,
                        const std::function<std::optional<Device>(const std::string& expert)>& where);

/// The layer index of an expert named "<layers_prefix>.N. ...", or nullopt.
std::optional<int64_t> expert_layer(const std::string& expert, const std::string& layers_prefix);

/// What a plan leaves free of a device's budget: the budget (options.max_memory, else get_max_memory()) less the
/// weights `map` puts there (at options.dtype) and the reservations on it; 0 when nothing is left.
int64_t unplanned_budget(const nn::Module& model, const DeviceMap& map, const PlanOptions& options, Device device);

/// What `auto` reserves for the expert cache before experts are placed in RAM, on a cpu-only budget: when the experts
/// do not all fit beside the dense parts, twice one token's working set (experts_per_token × the largest expert × the
/// layers with experts), at most three quarters of the room left (the staging pool comes next) — RAM as a cache of
/// recently routed experts saves what resident experts would under uniform routing, and more when routing repeats
/// (measured in docs/benchmarks.md). 0 when everything fits, when GPUs are in the budget, or when the room holds less
/// than one expert per layer (the cache keeps a share per layer, io/weights_cache.h: below that nothing comes back).
int64_t expert_cache_reservation(const nn::Module& model, const PlanOptions& options,
                                 const std::vector<std::string>& expert_classes, int64_t experts_per_token);

/// The default size of the expert cache in RAM (DispatchOptions::expert_cache): what the plan leaves free of the cpu
/// budget, at most the bytes of the experts placed on disk; 0 when no expert is on disk or when that room holds less
/// than one expert per layer (the cache keeps a share per layer, io/weights_cache.h: below that it never hits).
int64_t default_expert_cache_bytes(const nn::Module& model, const DeviceMap& map, const PlanOptions& options,
                                   const std::vector<std::string>& expert_classes);

}  // namespace ferry
