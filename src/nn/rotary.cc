// RoPE inverse frequencies with transformers' scalings (modeling_rope_utils.py: default, linear, llama3) and the
// RotaryEmbedding module that holds them. Arithmetic is f32, step for step as transformers does it in torch, so the
// frequencies agree to the last bit or two.
#include "ferry/nn/rotary.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/ops/rotary.h"

namespace ferry::nn {

namespace {

void check_positive(double v, const char* name, const std::string& where) {
  if (!(v > 0) || !std::isfinite(v))
    throw Error(std::string(name) + " = " + std::to_string(v) + " must be a positive number", where);
}

// transformers' _compute_llama3_parameters, in f32.
void apply_llama3_scaling(std::vector<float>& inv_freq, const RopeParameters& p) {
  const float factor = static_cast<float>(p.factor);
  const float low = static_cast<float>(p.low_freq_factor);
  const float high = static_cast<float>(p.high_freq_factor);
  const float old_context_len = static_cast<float>(p.original_max_position_embeddings);
  const float low_freq_wavelen = old_context_len / low;
  const float high_freq_wavelen = old_context_len / high;
  for (float& f : inv_freq) {
    const float wavelen = static_cast<float>(2 * std::numbers::pi) / f;
    if (wavelen > low_freq_wavelen) {
      f = f / factor;  // long wavelengths: fully interpolated
    } else if (!(wavelen < high_freq_wavelen)) {
      // The band between: a smooth mix of the scaled and unscaled frequency.
      const float smooth = (old_context_len / wavelen - low) / (high - low);
      f = (1 - smooth) * f / factor + smooth * f;
    }  // short wavelengths: unchanged
  }
}

}  // namespace

Tensor rope_inverse_frequencies(int64_t rotary_dim, const RopeParameters& params) {
  const std::string where = "rope_parameters (rope_type \"" + params.rope_type + "\")";
  if (rotary_dim <= 0 || rotary_dim % 2 != 0)
    throw Error("rotary dimension " + std::to_string(rotary_dim) + " must be positive and even", where);
  check_positive(params.rope_theta, "rope_theta", where);

  std::vector<float> inv_freq = ops::rope_inv_freq(rotary_dim, params.rope_theta).to_vector<float>();
  if (params.rope_type == "default") {
    // nothing to scale
  } else if (params.rope_type == "linear") {
    check_positive(params.factor, "factor", where);
    // Dividing the frequencies by factor is dividing the positions by it (transformers' NOTE in the same place).
    for (float& f : inv_freq) f /= static_cast<float>(params.factor);
  } else if (params.rope_type == "llama3") {
    check_positive(params.factor, "factor", where);
    check_positive(params.low_freq_factor, "low_freq_factor", where);
    check_positive(params.high_freq_factor, "high_freq_factor", where);
    check_positive(static_cast<double>(params.original_max_position_embeddings), "original_max_position_embeddings",
                   where);
    if (!(params.high_freq_factor > params.low_freq_factor))
      throw Error("high_freq_factor must be larger than low_freq_factor", where);
    apply_llama3_scaling(inv_freq, params);
  } else if (params.rope_type == "frequency_factors") {
    if (params.frequency_factors.size() != inv_freq.size())
      throw Error(std::to_string(params.frequency_factors.size()) + " frequency factors for " +
                      std::to_string(inv_freq.size()) + " frequencies (rotary dimension " + std::to_string(rotary_dim) +
                      " / 2)",
                  where, "the file's rope_freqs tensor must have one factor per rotated pair");
    for (std::size_t i = 0; i < inv_freq.size(); ++i) {
      check_positive(params.frequency_factors[i], "frequency factor", where);
      inv_freq[i] /= static_cast<float>(params.frequency_factors[i]);
    }
  } else {
    throw Error("rope_type \"" + params.rope_type + "\" is not supported", where,
                "ferry implements \"default\", \"linear\" and \"llama3\" (and \"frequency_factors\" for GGUF files)");
  }
  return Tensor::from_vector(inv_freq, {rotary_dim / 2});
}

RotaryEmbedding::RotaryEmbedding(std::string type_name, int64_t rotary_dim, const RopeParameters& params,
                                 bool with_original_copy)
    : type_name_(std::move(type_name)), rotary_dim_(rotary_dim), params_(params) {
  // Computed values, never read from a checkpoint: non-persistent, like transformers' nn.Buffer(persistent=False).
  Tensor inv_freq = rope_inverse_frequencies(rotary_dim, params);
  register_buffer("inv_freq", inv_freq, /*persistent=*/false);
  if (with_original_copy) register_buffer("original_inv_freq", inv_freq.clone(), /*persistent=*/false);
}

Value RotaryEmbedding::forward(const Args& /*args*/) { return buffer("inv_freq"); }

}  // namespace ferry::nn
