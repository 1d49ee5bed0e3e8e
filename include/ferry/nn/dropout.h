// Dropout (torch.nn.Dropout) at inference: the identity. ferry never trains, so the module only exists to keep the
// module tree — and therefore module names, device-map keys and Accelerate's plans — equal to the PyTorch model's
// (GPT-2's transformer.drop, attn.resid_dropout, ...).
#pragma once

#include <string>

#include "ferry/nn/module.h"

namespace ferry::nn {

/// No parameters; forward returns args[0] unchanged. p is kept for printing only.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5) : p_(p) {}

  std::string type_name() const override { return "Dropout"; }
  Value forward(const Args& args) override;
  using Module::operator();

  double p() const noexcept { return p_; }

 private:
  double p_;
};

}  // namespace ferry::nn
