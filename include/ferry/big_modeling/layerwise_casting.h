// Layerwise casting: weights stored in a narrow dtype (f8_e4m3fn, bf16) and cast to the compute dtype only for
// the forward of the layer that uses them, then back.
#pragma once

#include <string>
#include <vector>

#include "ferry/nn/hooks.h"

namespace ferry {

/// Accelerate: LayerwiseCastingHook
class LayerwiseCastingHook : public nn::ModelHook {
 public:
  LayerwiseCastingHook(DType storage_dtype, DType compute_dtype) : storage_(storage_dtype), compute_(compute_dtype) {}
  void init_hook(nn::Module& module) override { module.to(storage_); }
  nn::Args pre_forward(nn::Module& module, nn::Args args) override {
    module.to(compute_);
    return args;
  }
  nn::Value post_forward(nn::Module& module, nn::Value output) override {
    module.to(storage_);
    return output;
  }
  void forward_failed(nn::Module& module) noexcept override;
  std::string describe() const override;

 private:
  DType storage_, compute_;
};

/// Attaches a LayerwiseCastingHook (appended to any existing hook) to every Linear, Conv1D and Embedding in
/// the tree, except modules whose dotted name matches one of `skip_modules_pattern` (ECMAScript regex, searched
/// anywhere in the name, like re.search) or whose type_name() is in `skip_modules_classes`; a skipped module's
/// subtree is skipped too. Throws ferry::Error for an invalid regex or a non-floating storage/compute dtype.
/// Accelerate: attach_layerwise_casting_hooks
void attach_layerwise_casting_hooks(nn::Module& model, DType storage_dtype, DType compute_dtype,
                                    const std::vector<std::string>& skip_modules_pattern = {},
                                    const std::vector<std::string>& skip_modules_classes = {});

}  // namespace ferry
