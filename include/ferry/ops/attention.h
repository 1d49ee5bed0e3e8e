// Causal scaled-dot-product attention over a KV cache, with grouped-query heads.
//
// Legend: T = new query tokens, S = keys in the cache (including the T new ones), Hq = query heads,
// Hkv = key/value heads (Hkv divides Hq; query head h reads kv head h / (Hq / Hkv)), D = head_dim.
#pragma once

#include "ferry/core/tensor.h"

namespace ferry::ops {

/// q: [T, Hq, D] f32; k, v: [S, Hkv, D] f32 or f16/bf16 (cache dtype). Query t sits at absolute position
/// q_offset + t and attends keys 0 .. q_offset + t (causal); with sliding_window > 0 only the last
/// sliding_window of those (Mistral). scale multiplies q·k (usually 1/√D). Returns [T, Hq, D] f32.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_offset, float scale,
                 int64_t sliding_window = 0);

}  // namespace ferry::ops
