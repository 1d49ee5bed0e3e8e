// Rotary position embeddings (RoFormer, arXiv 2104.09864): the inverse frequencies a model family rotates q and k
// with, including the context-extension scalings of Hugging Face's ROPE_INIT_FUNCTIONS ("linear", "llama3"), and the
// RotaryEmbedding module that holds them.
//
// Legend: D = head_dim, R = rotary_dim (≤ D, even); inv_freq has R/2 entries.
//
// The module mirrors transformers' LlamaRotaryEmbedding (modeling_llama.py): non-persistent f32 buffers inv_freq and
// original_inv_freq, so module sizes and device maps match Accelerate's. Its forward returns inv_freq rather than
// HF's (cos, sin) tables: ferry's ops::apply_rotary_ computes the angles positions[t] · inv_freq[i] itself, in f32
// as transformers does. Passing inv_freq as a forward argument lets hooks move it to each layer's execution device.
// "frequency_factors" is ferry's own type for llama.cpp files: GGUF stores Llama 3's scaling as one divisor per
// frequency (the tensor rope_freqs, which llama.cpp's converter computes from rope_scaling), not as its parameters.
// Left out: the rope types that change with the sequence length or scale the attention ("dynamic", "yarn",
// "longrope"); asking for one is an error naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/nn/module.h"

namespace ferry::nn {

/// A model's RoPE settings, as transformers' `config.rope_parameters` (or legacy `rope_theta` + `rope_scaling`)
/// spell them.
struct RopeParameters {
  std::string rope_type = "default";  // "default", "linear", "llama3" or "frequency_factors"
  double rope_theta = 10000.0;
  double factor = 1.0;                               // linear, llama3
  double low_freq_factor = 1.0;                      // llama3
  double high_freq_factor = 4.0;                     // llama3
  int64_t original_max_position_embeddings = 8192;   // llama3
  std::vector<double> frequency_factors;             // frequency_factors: R/2 divisors (GGUF's rope_freqs)
};

/// inv_freq [R/2] f32 for `rotary_dim` R under `params`:
///   default: 1 / theta^(2i/R)
///   linear:  default / factor (equivalent to dividing the positions by factor)
///   llama3:  wavelengths 2π/inv_freq longer than original_max_position_embeddings / low_freq_factor are divided by
///            factor, shorter than original_max_position_embeddings / high_freq_factor kept, and the band between
///            interpolated smoothly (transformers' _compute_llama3_parameters).
///   frequency_factors: default / frequency_factors[i] (llama.cpp's ggml_rope_ext with freq_factors).
/// Throws ferry::Error for an odd or non-positive rotary_dim, a non-positive theta or factor, and unknown rope types.
/// HF: ROPE_INIT_FUNCTIONS[rope_type](config)
Tensor rope_inverse_frequencies(int64_t rotary_dim, const RopeParameters& params);

/// Holds inv_freq (and a copy, original_inv_freq, as transformers does), both non-persistent f32 buffers [R/2].
/// type_name() is the family's class name ("LlamaRotaryEmbedding", "GPTJRotaryEmbedding").
/// Forward: no tensor arguments needed; returns inv_freq (on whatever device hooks placed this module).
class RotaryEmbedding : public Module {
 public:
  /// with_original_copy=false registers only inv_freq (families whose HF module has no original_inv_freq).
  RotaryEmbedding(std::string type_name, int64_t rotary_dim, const RopeParameters& params,
                  bool with_original_copy = true);

  std::string type_name() const override { return type_name_; }
  Value forward(const Args& args) override;
  using Module::operator();

  int64_t rotary_dim() const noexcept { return rotary_dim_; }
  const RopeParameters& params() const noexcept { return params_; }
  const Tensor& inv_freq() const { return buffer("inv_freq"); }

 private:
  std::string type_name_;
  int64_t rotary_dim_;
  RopeParameters params_;
};

}  // namespace ferry::nn
