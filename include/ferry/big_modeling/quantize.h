// Quantized weights for a model: the Linear and Embedding weights stored in a block-quantized dtype (q8_0 ... q6_k,
// core/dtype.h), computed on by ops::linear's quantized kernels and dequantized row by row by ops::embedding.
//
// On a skeleton (init_empty_weights) it sets the storage dtype, so the checkpoint loaders quantize each weight as it
// arrives (set_module_tensor_to_device keeps a quantized slot's dtype) and size planning counts quantized bytes:
//
//   { auto guard = nn::init_empty_weights(); model = AutoModelForCausalLM::from_config(config, DType::BF16); }
//   quantize_weights(*model, DType::Q4_K);          // before loading: the plan sees 144 bytes per 256 weights
//   load_checkpoint_in_model(*model, folder, ...);
//
// On a loaded model it quantizes the weights in place. FromPretrainedOptions::quantize and `ferry ... --quantize`
// do the first. transformers: from_pretrained(..., quantization_config=...) (its quantizers replace nn.Linear);
// llama.cpp: llama-quantize, which writes the quantized file instead.
#pragma once

#include <string>
#include <vector>

#include "ferry/core/dtype.h"
#include "ferry/nn/module.h"

namespace ferry {

/// Stores the weight of every nn::Linear and nn::Embedding of `model` as `qtype`, except modules whose dotted name
/// equals or starts with one of `skip_modules` (followed by "."), and weights whose rows are not a whole number of
/// blocks (kept, and listed in the return value's `kept`). Weights on meta get the dtype only; host weights are
/// quantized now. Throws ferry::Error for a non-quantized qtype or a weight on a GPU (quantized weights run on the
/// CPU).
struct QuantizeReport {
  std::vector<std::string> quantized;  ///< parameter names now of qtype
  std::vector<std::string> kept;       ///< weights left as they were: rows not whole blocks
};
QuantizeReport quantize_weights(nn::Module& model, DType qtype, const std::vector<std::string>& skip_modules = {});

}  // namespace ferry
