// Splitting a fused projection's output along its last dimension: GPT-2's c_attn yields [T, 3C] = q | k | v.
//
// Tensor views only slice the leading dimension, so the pieces are copied (one pass, T · 3C floats — small next to
// the matmul that produced them). Host-addressable devices only (cpu, virt:N); elsewhere it throws ferry::Error
// until ops gains a split kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "ferry/core/tensor.h"

namespace ferry::nn {

/// x [..., sum(sizes)] -> one contiguous tensor [..., sizes[i]] per entry, same dtype and device.
/// torch: x.split(sizes, dim=-1). Throws ferry::Error when the sizes do not add up to x's last dimension.
std::vector<Tensor> split_last_dim(const Tensor& x, const std::vector<int64_t>& sizes);

/// A fused query/key/value projection's output qkv [T, 3·H·D] as q, k, v, each [T, H, D]. Per head (blocks false):
/// the columns are [H, 3, D], each head's q, k and v side by side (GPT-NeoX's and BLOOM's query_key_value); with
/// `blocks`, [3, H, D]: all queries, then all keys, then all values (the order llama.cpp's converter writes them in).
/// Throws ferry::Error when qkv is not [T, 3·H·D].
std::vector<Tensor> split_fused_qkv(const Tensor& qkv, int64_t heads, int64_t head_dim, bool blocks);

}  // namespace ferry::nn
