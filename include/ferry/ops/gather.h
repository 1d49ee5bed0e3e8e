// Embedding lookup and selection over logits.
#pragma once

#include <utility>

#include "ferry/core/tensor.h"

namespace ferry::ops {

/// rows of weight [V, D] (any float dtype) picked by ids [...] (i64, or i32) → [..., D] f32, converted exactly.
/// Throws ferry::Error naming the id and its index when an id is outside [0, V); every id is checked first.
Tensor embedding(const Tensor& weight, const Tensor& ids);

/// Index of the largest value along the last dimension of f32 x [..., V] → i64 [...] (first index on ties).
Tensor argmax(const Tensor& x);

/// The k largest values of f32 x [V] and their indices, sorted descending (ties: lower index first).
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k);

}  // namespace ferry::ops
