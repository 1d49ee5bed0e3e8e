// Causal scaled-dot-product attention over a KV cache, with grouped-query heads.
//
// Legend: T = new query tokens, S = keys in the cache (including the T new ones), Hq = query heads,
// Hkv = key/value heads (Hkv divides Hq; query head h reads kv head h / (Hq / Hkv)), D = head_dim.
#pragma once

#include "ferry/core/tensor.h"

namespace ferry::ops {

/// q: [T, Hq, D] f32; k: [S, Hkv, D], v: [S, Hkv, Dv], both f32, f16 or bf16 (the cache dtype; Dv is usually D).
/// Query t sits at absolute position q_offset + t and attends keys 0 .. q_offset + t (causal); with
/// sliding_window > 0 only the last sliding_window of those (Mistral: keys in (pos − window, pos]). Keys past
/// q_offset + T − 1 are never read, so the cache may be preallocated longer (S ≥ q_offset + T is required).
/// scale multiplies q·k (usually 1/√D); softmax runs in f32. softcap > 0 caps each scaled score s to
/// softcap · tanh(s / softcap) before the softmax (Gemma 2's attn_logit_softcapping); 0 leaves scores as they are.
/// Returns [T, Hq, Dv] f32 on q's device. Throws ferry::Error naming the shapes when heads, dims or cache length do
/// not fit, or for a negative softcap.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_offset, float scale,
                 int64_t sliding_window = 0, float softcap = 0.0f);

}  // namespace ferry::ops

namespace ferry::ops {

/// Attention with an additive bias on the scores, as T5 computes it (its relative position bias takes the place
/// of rotary or absolute positions, and T5 does not scale q·k: scale = 1). q: [T, H, D] f32; k: [S, H, D], v:
/// [S, H, Dv] (f32, f16 or bf16; the same number of heads as q); bias: [H, T, S] f32 added to scale · q·k, or
/// undefined for none (T5's cross-attention). causal: query t sits at position q_offset + t and sees keys
/// 0 .. q_offset + t (S ≥ q_offset + T); otherwise every query sees all S keys. Softmax in f32. Returns [T, H, Dv]
/// f32 on q's device: a CUDA kernel on a GPU; on another accelerator it is computed on the host and copied back.
Tensor attention_with_bias(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, int64_t q_offset,
                           bool causal, float scale = 1.0f);

}  // namespace ferry::ops
