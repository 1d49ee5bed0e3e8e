// Rotary position embeddings (RoFormer, arXiv 2104.09864) applied in place to q or k.
//
// Legend: T = tokens, H = heads, D = head_dim, R = rotary_dim (≤ D, even); only the first R of each head rotate.
// Layouts: RotateHalf pairs (i, i + R/2) — Llama, Mistral, Qwen2, GPT-NeoX; Interleaved pairs (2i, 2i + 1) — GPT-J.
// Frequencies are passed in, so models own their scaling (llama3, linear) and ops stay model-agnostic.
#pragma once

#include "ferry/core/tensor.h"

namespace ferry::ops {

enum class RopeLayout { RotateHalf, Interleaved };

/// inv_freq[i] = 1 / theta^(2i / R), i < R/2, as f32 [R/2].
Tensor rope_inv_freq(int64_t rotary_dim, double theta);

/// x: [T, H, D] f32 (modified in place); positions: [T] i64; inv_freq: [R/2] f32.
/// Angle for token t, pair i: positions[t] · inv_freq[i], computed in f32 like transformers.
/// attention_scaling multiplies cos and sin (transformers' `attention_scaling`: 1 except for YaRN/LongRoPE).
void apply_rotary_(Tensor& x, const Tensor& positions, const Tensor& inv_freq, RopeLayout layout,
                   float attention_scaling = 1.0f);

}  // namespace ferry::ops
