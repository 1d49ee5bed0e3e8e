// Internals shared by the planning files (infer.cc, fallback.cc, balance.cc, reserve.cc); not a public header.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "ferry/big_modeling/auto_device_map.h"

namespace ferry::detail {

using PlanQueue = std::deque<PlanItem>;
using TiedGroups = std::vector<std::vector<std::string>>;

/// Whole-component containment: `name` is `module` itself or lies below it. Accelerate tests
/// `module + "." in name + "."` (a substring test, so "0.1.weight" is "in" module "1"); ferry fixes that here.
bool is_inside(const std::string& name, const std::string& module);

/// The members of tied groups that have a member inside `name` and one outside it: the parameters that must
/// come along when `name` is placed.
std::vector<std::string> outside_tied_params(const std::string& name, const TiedGroups& tied);

/// Accelerate: get_module_size_with_ties. For each tied parameter, the first queue item that contains it (by
/// whole-component prefix) is its owner; size = module_size + Σ(owner size − parameter size). Owners are listed
/// once per parameter, as in Accelerate. A parameter whose owner is not queued (already placed) adds nothing
/// (Accelerate raises an IndexError there).
struct SizeWithTies {
  int64_t size = 0;
  std::vector<PlanItem> owners;
};
SizeWithTies size_with_ties(const std::vector<std::string>& tied_params, int64_t module_size,
                            const ModuleSizes& sizes, const PlanQueue& queue);

/// What a module is replaced by when it is split: its direct parameters, its children and — unlike Accelerate,
/// which drops them (#3956, #4014) — its direct buffers, each named "<name>.<local>".
std::vector<PlanItem> split_items(const PlanItem& item);
/// True when `item` can be split: a module with children whose type is not no-split.
bool can_split(const PlanItem& item, const std::vector<std::string>& no_split_module_classes);

/// Accelerate: fallback_allocate. Breadth-first (in Accelerate's order) for the first item whose size with ties
/// is <= size_limit; when found, its ancestors in `queue` are split so it can be taken out, and it is returned.
/// A negative limit finds nothing.
std::optional<PlanItem> fallback_allocate(PlanQueue& queue, const ModuleSizes& sizes, int64_t size_limit,
                                          const std::vector<std::string>& no_split_module_classes,
                                          const TiedGroups& tied);

/// `budget` less the reservations; throws ferry::Error when a reservation names a device outside the budget or
/// does not fit its device.
MaxMemory budget_after_reservations(MaxMemory budget, const std::vector<Reservation>& reservations);

/// get_balanced_memory on an already-resolved budget; user_set = the user gave max_memory.
MaxMemory balance_budget(const nn::Module& model, MaxMemory budget, bool user_set,
                         const std::vector<std::string>& no_split_module_classes, std::optional<DType> dtype,
                         const SpecialDTypes& special_dtypes, bool low_zero);

/// The planning loop on a final budget (reservations already applied).
DeviceMap infer_with_budget(const nn::Module& model, const MaxMemory& budget, const PlanOptions& options);

/// With allow_disk = false: throws ferry::Error, with the numbers, when the model cannot fit the budget at all.
void check_budget_can_fit(const ModuleSizes& sizes, const MaxMemory& budget, const PlanOptions& options);

}  // namespace ferry::detail
