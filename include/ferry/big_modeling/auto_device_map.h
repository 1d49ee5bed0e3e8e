// Planning: infer_auto_device_map (Accelerate's algorithm), the "auto" / "balanced" / "balanced_low_0" /
// "sequential" modes of load_checkpoint_and_dispatch, and ferry's reservations.
//
// The plan fills devices in order (GPUs, cpu, disk). On the *main devices* (the first GPU and the cpu) it keeps
// back the size of the largest layer still to place, so the largest offloaded layer can always be brought in to
// run. A module that does not fit is split into its direct tensors and children unless it is no-split; tied
// parameters are placed with their group.
//
// Where ferry departs from Accelerate on purpose (each marked in the code):
//  - a split keeps the module's direct buffers (Accelerate drops them and its map misses them; #3956, #4014);
//  - "inside a module" for tied parameters is a whole-component prefix test (Accelerate's substring test treats
//    "0.1.weight" as inside module "1");
//  - balanced_low_0 treats the first GPU of the budget as GPU 0 and sums the others (Accelerate assumes ids
//    0..n-1 and fails otherwise);
//  - reservations (KV cache, activations, prefetch staging) are taken off the budget first, and with
//    allow_disk = false an impossible budget is an error, with the numbers, before anything is loaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/big_modeling/device_map.h"
#include "ferry/big_modeling/max_memory.h"
#include "ferry/big_modeling/module_sizes.h"

namespace ferry {

/// Bytes a device must keep free for something other than weights.
struct Reservation {
  Device device;
  int64_t bytes = 0;
  std::string purpose;  // "KV cache for 4096 tokens", shown in errors and logs
};

/// The order in which a plan fills the devices (beyond Accelerate; PlanOptions::strategy).
enum class PlanStrategy {
  /// Module order, as Accelerate fills devices: the plan is Accelerate's (the default).
  Accelerate,
  /// Cost-aware: what every generated token reads first (in module order), then experts (expert_module_classes),
  /// then the modules that run once per prompt (prompt_modules: a seq2seq model's encoder and its decoder's
  /// cross-attention key and value projections), then tables read by the row (embeddings not tied to an lm_head,
  /// row_lookup_tables in token_reads.h: a row per token wherever they are). The fastest memory then holds what
  /// generation reads most often; a model with none of these (decoder-only, dense, tied embeddings) gets
  /// Accelerate's plan, and so does any budget where Accelerate's order reads no more per token.
  Fast,
};

/// Options of infer_auto_device_map; the Accelerate keyword of the same name has the same default.
struct PlanOptions {
  /// Budget per device; nullopt = get_max_memory() (free memory of each GPU, the cpu's MemAvailable).
  std::optional<MaxMemory> max_memory;
  /// type_name()s of modules never split across devices, e.g. {"LlamaDecoderLayer"}.
  std::vector<std::string> no_split_module_classes;
  /// The dtype weights will be loaded in (float tensors count min(dtype, own) bytes); nullopt = their own.
  std::optional<DType> dtype;
  SpecialDTypes special_dtypes;
  /// Log each decision (ferry::log_info).
  bool verbose = false;
  /// Merge siblings on one device into their parent (clean_device_map).
  bool clean_result = true;
  /// Buffers of offloaded modules are offloaded too (else they stay on the execution device, which must fit them).
  bool offload_buffers = false;
  /// When a device would stay empty, look breadth-first for a submodule that fits it.
  bool fallback_allocation = false;

  // ---- ferry extensions ----
  /// Taken off max_memory before planning; several on one device add up.
  std::vector<Reservation> reservations;
  /// false: never plan onto disk; a model that does not fit the other devices is a ferry::Error.
  bool allow_disk = true;
  /// Mixtures of experts: type_name()s of the expert modules ("MixtralBlockSparseTop2MLP"). Non-empty: each expert
  /// is a unit of the plan (placed whole, never split), the modules holding experts are split down to them, and the
  /// dense parts (embeddings, attention, norms, routers, shared experts, the head) are placed first, the experts
  /// after them in layer order, so the fastest memory holds what every token reads and a token reads from disk only
  /// the experts it routes to. Empty: Accelerate's plan.
  std::vector<std::string> expert_module_classes;
  /// The order devices are filled in (Accelerate's, or PlanStrategy::Fast); `device_map="fast"` sets Fast.
  PlanStrategy strategy = PlanStrategy::Accelerate;
  /// Names of the modules that run once per prompt rather than once per generated token (models'
  /// LanguageModelInfo::prompt_modules, e.g. "encoder"). Used by PlanStrategy::Fast, which places them last, each a
  /// unit of its own (split out of the no-split block that holds it; cleaning may merge them back into an entry on
  /// one device, which changes nothing read: offloaded weights are read by the module that uses them).
  std::vector<std::string> prompt_modules;
};

/// Accelerate: infer_auto_device_map
///   auto model = build_llama_skeleton();  // under init_empty_weights
///   PlanOptions o;  o.max_memory = MaxMemory::parse({{"0", "10GiB"}, {"cpu", "30GiB"}});
///   o.no_split_module_classes = {"LlamaDecoderLayer"};
///   DeviceMap map = infer_auto_device_map(*model, o);
/// Throws ferry::Error for reservations larger than a device's budget, and (allow_disk = false) for a model
/// that does not fit.
DeviceMap infer_auto_device_map(const nn::Module& model, const PlanOptions& options = {});

/// Accelerate: get_balanced_memory. A budget that spreads the model evenly over the GPUs: each GPU but the last
/// gets total/n plus 1.25 × max(first no-split module size, mean leaf-module size); the last keeps all of its
/// memory. One GPU and no user budget: 90% of it. low_zero: GPU 0 gets only what the others cannot hold.
MaxMemory get_balanced_memory(const nn::Module& model, const std::optional<MaxMemory>& max_memory = std::nullopt,
                              const std::vector<std::string>& no_split_module_classes = {},
                              std::optional<DType> dtype = std::nullopt, const SpecialDTypes& special_dtypes = {},
                              bool low_zero = false);

/// The string forms of device_map that load_checkpoint_and_dispatch accepts, and ferry's "fast": auto's budget
/// with PlanStrategy::Fast.
enum class DeviceMapMode { Auto, Balanced, BalancedLow0, Sequential, Fast };
/// "auto", "balanced", "balanced_low_0", "sequential", "fast"; anything else is a ferry::Error listing them.
DeviceMapMode parse_device_map_mode(std::string_view mode);
std::string_view device_map_mode_name(DeviceMapMode mode);

/// A device map from a mode, exactly as load_checkpoint_and_dispatch resolves it: every mode but "sequential"
/// first balances the budget (low_zero for "balanced_low_0"), then infer_auto_device_map runs on it ("fast": with
/// options.strategy = PlanStrategy::Fast).
DeviceMap plan_device_map(const nn::Module& model, DeviceMapMode mode, const PlanOptions& options = {});

/// `map` with each entry that holds one of `modules` (strictly below it) split into its direct tensors and children,
/// recursively, so that every one of `modules` is covered by an entry of its own or one inside it; each part keeps
/// the device of the entry it came from (place_experts starts from it).
DeviceMap split_out_modules(const nn::Module& model, const DeviceMap& map, const std::vector<std::string>& modules);

/// Bytes a device map puts on each device (weights only, per compute_module_sizes with `dtype`), in
/// MaxMemory order. Useful to print a plan and to assert budgets.
MaxMemory device_map_usage(const nn::Module& model, const DeviceMap& device_map,
                           std::optional<DType> dtype = std::nullopt, const SpecialDTypes& special_dtypes = {});

/// The plan as a table for people, to print before anything is loaded (DESIGN.md, big_modeling 17): one row per
/// device-map entry (module, device, bytes, dtypes as they will be loaded), then each device's total against its
/// budget (options.max_memory, when given) and the reservations on it. Tensors no entry covers are listed last.
///   module                 device   bytes       dtype
///   model.embed_tokens     cuda:0   250.00 MiB  bf16
///   ...
///   cuda:0: 9.20 GiB of weights + 1.00 GiB reserved (KV cache) of 10.00 GiB
std::string format_plan(const nn::Module& model, const DeviceMap& device_map, const PlanOptions& options = {});

}  // namespace ferry
