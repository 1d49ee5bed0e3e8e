// quantize_weights (see include/ferry/big_modeling/quantize.h).
#include "ferry/big_modeling/quantize.h"

#include "ferry/core/error.h"
#include "ferry/nn/embedding.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/module_tensors.h"

namespace ferry {
namespace {

bool skipped(const std::string& name, const std::vector<std::string>& skip) {
  for (const auto& s : skip)
    if (name == s || (name.size() > s.size() && name.compare(0, s.size(), s) == 0 && name[s.size()] == '.'))
      return true;
  return false;
}

}  // namespace

QuantizeReport quantize_weights(nn::Module& model, DType qtype, const std::vector<std::string>& skip_modules) {
  if (!is_quantized(qtype))
    throw Error(std::string(dtype_name(qtype)) + " is not a quantized dtype", "quantize_weights",
                "use one of q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k");
  QuantizeReport report;
  for (const auto& [name, module] : model.named_modules()) {
    if (!dynamic_cast<nn::Linear*>(module) && !dynamic_cast<nn::Embedding*>(module)) continue;
    if (skipped(name, skip_modules)) continue;
    const std::string param = name.empty() ? "weight" : name + ".weight";
    const Tensor w = module->parameter("weight");
    if (w.dtype() == qtype) continue;  // a tied weight met a second time
    if (!is_floating_point(w.dtype()) || w.dim() != 2 || w.size(1) % dtype_block_size(qtype) != 0) {
      report.kept.push_back(param);
      continue;
    }
    if (w.device().is_cuda())
      throw Error("cannot quantize a weight on " + w.device().str(), param,
                  "quantized weights run on the CPU: quantize before dispatching, or keep the GPU part unquantized");
    // On meta only the dtype changes; on the host the values are quantized now.
    const Tensor value = w.is_meta() ? Tensor::empty(w.shape(), qtype, Device::meta()) : w.to(qtype);
    nn::set_module_tensor_to_device(model, param, w.device(), value, qtype);
    report.quantized.push_back(param);
  }
  return report;
}

}  // namespace ferry
