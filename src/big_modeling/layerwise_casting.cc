// LayerwiseCastingHook and attach_layerwise_casting_hooks (see include/ferry/big_modeling/layerwise_casting.h).
#include "ferry/big_modeling/layerwise_casting.h"

#include <algorithm>

// GCC 12 reports a false -Wmaybe-uninitialized inside libstdc++'s <regex> at -O2 (GCC bug 105562).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <regex>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/nn/embedding.h"
#include "ferry/nn/linear.h"

namespace ferry {
namespace {

// Accelerate casts Linear and Conv layers; ferry's Conv1D is GPT-2's transposed linear, and embeddings are
// the other large matrices a decoder stores.
bool supports_casting(const nn::Module& m) {
  return dynamic_cast<const nn::Linear*>(&m) || dynamic_cast<const nn::Conv1D*>(&m) ||
         dynamic_cast<const nn::Embedding*>(&m);
}

void attach(nn::Module& module, const std::string& name, DType storage, DType compute,
            const std::vector<std::regex>& patterns, const std::vector<std::string>& classes) {
  const bool skip =
      std::find(classes.begin(), classes.end(), module.type_name()) != classes.end() ||
      std::any_of(patterns.begin(), patterns.end(), [&](const std::regex& r) { return std::regex_search(name, r); });
  if (skip) {
    log_debug("Skipping layerwise casting for layer \"{}\"", name);
    return;
  }
  if (supports_casting(module)) {
    log_debug("Applying layerwise casting to layer \"{}\"", name);
    nn::add_hook_to_module(module, std::make_shared<LayerwiseCastingHook>(storage, compute), /*append=*/true);
    return;
  }
  for (const auto& child : module.children())
    attach(*child.module, name.empty() ? child.name : name + "." + child.name, storage, compute, patterns, classes);
}

}  // namespace

void LayerwiseCastingHook::forward_failed(nn::Module& module) noexcept {
  try {
    module.to(storage_);
  } catch (const std::exception& e) {
    log_warning("LayerwiseCastingHook: could not cast {} back to {}: {}", module.type_name(), dtype_name(storage_),
                e.what());
  }
}

std::string LayerwiseCastingHook::describe() const {
  return "LayerwiseCastingHook(storage_dtype=" + std::string(dtype_name(storage_)) +
         ", compute_dtype=" + std::string(dtype_name(compute_)) + ")";
}

void attach_layerwise_casting_hooks(nn::Module& model, DType storage_dtype, DType compute_dtype,
                                    const std::vector<std::string>& skip_modules_pattern,
                                    const std::vector<std::string>& skip_modules_classes) {
  if (!is_floating_point(storage_dtype) || !is_floating_point(compute_dtype))
    throw Error("layerwise casting needs floating-point dtypes, got storage " + std::string(dtype_name(storage_dtype)) +
                " and compute " + std::string(dtype_name(compute_dtype)));
  std::vector<std::regex> patterns;
  for (const auto& p : skip_modules_pattern) {
    try {
      patterns.emplace_back(p, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw Error("invalid skip_modules_pattern '" + p + "': " + e.what());
    }
  }
  attach(model, "", storage_dtype, compute_dtype, patterns, skip_modules_classes);
}

}  // namespace ferry

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
