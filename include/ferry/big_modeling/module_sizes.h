// Module sizes for planning: how many bytes every prefix of a model's tensor names will take once loaded,
// and the largest "layer" (a leaf or a no-split module) the planner must keep room for.
//
// Sizes are computed from shapes and dtypes only, so a model built under init_empty_weights (all meta) plans
// exactly like a loaded one. Bool tensors count 1/8 byte per element as in Accelerate, rounded up to a whole
// byte per tensor (Accelerate's sizes turn fractional there; ferry's stay integers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ferry/core/dtype.h"  // DType, dtype_byte_size (Accelerate: dtype_byte_size)

namespace ferry {
namespace nn {
class Module;
}

/// Per-tensor dtype overrides for planning, by full tensor name ("lm_head.weight" -> F32).
using SpecialDTypes = std::unordered_map<std::string, DType>;

/// Bytes per name prefix: "" (the whole model), every module, every tensor. Ordered by first appearance in the
/// tensor walk (parameters first, then buffers), like Accelerate's defaultdict. Looking up a name that is not
/// there gives 0, as the defaultdict does (e.g. the second name of a tied parameter, counted once).
class ModuleSizes {
 public:
  int64_t operator[](std::string_view name) const;
  bool contains(std::string_view name) const { return index_.count(std::string(name)) != 0; }
  /// Adds `bytes` to `name`, appending it if new.
  void add(const std::string& name, int64_t bytes);
  const std::vector<std::pair<std::string, int64_t>>& entries() const { return entries_; }
  std::size_t size() const { return entries_.size(); }
  /// The whole model's size (the "" entry).
  int64_t total() const { return (*this)[""]; }

 private:
  std::vector<std::pair<std::string, int64_t>> entries_;
  std::unordered_map<std::string, std::size_t> index_;
};

/// Bytes of one tensor of `numel` elements of `own` dtype when loaded as `dtype` (nullopt: its own): float
/// tensors count min(dtype, own) bytes per element, integer and bool tensors keep their own size.
/// `special` (a special_dtypes entry) overrides both, for any tensor.
int64_t planned_tensor_bytes(int64_t numel, DType own, std::optional<DType> dtype,
                             std::optional<DType> special = std::nullopt);

/// Adds each tensor's bytes (parameters then buffers of the whole tree, tied ones once) to every prefix of its
/// name, including "". Accelerate: compute_module_sizes(model, dtype, special_dtypes, buffers_only)
ModuleSizes compute_module_sizes(const nn::Module& model, std::optional<DType> dtype = std::nullopt,
                                 const SpecialDTypes& special_dtypes = {}, bool buffers_only = false);

/// Total bytes of all buffers below `module` (persistent or not). Accelerate: compute_module_total_buffer_size
int64_t compute_module_total_buffer_size(const nn::Module& module, std::optional<DType> dtype = std::nullopt,
                                         const SpecialDTypes& special_dtypes = {});

/// An item of the planner's queue: a named submodule, or (module == nullptr) a named parameter or buffer.
struct PlanItem {
  std::string name;
  const nn::Module* module = nullptr;
};

/// The largest layer among `items` and every name realising it. A layer is a tensor, a module without children,
/// or a module whose type_name() is in `no_split_module_classes`; other modules are opened up (children only).
/// Accelerate: get_max_layer_size
struct MaxLayer {
  int64_t size = 0;
  std::vector<std::string> names;
};
MaxLayer get_max_layer_size(const std::vector<PlanItem>& items, const ModuleSizes& sizes,
                            const std::vector<std::string>& no_split_module_classes);

}  // namespace ferry
