// Loading a checkpoint's tensors into a model skeleton that stays resident on the cpu (internal to ferry_models).
//
// This is the device_map=None / "cpu" path of from_pretrained; plans with other devices go through big_modeling's
// load_checkpoint_in_model + dispatch_model instead (auto_model.cc). Kept separate because it also accepts
// checkpoints of the bare base model and skips stale buffers silently, and refuses missing weights outright.
#pragma once

#include "ferry/big_modeling/load_checkpoint.h"
#include "ferry/io/checkpoint.h"
#include "ferry/models/causal_lm.h"

namespace ferry::models::detail {

/// Fills every parameter and persistent buffer of `model` (built under init_empty_weights, parameters already of
/// the target dtype) from `files`, shard by shard. safetensors tensors already of the target dtype stay zero-copy
/// views of the mapped file. Checkpoint keys without the base_model_prefix ("h.0.attn.c_attn.weight" for a
/// GPT2LMHeadModel) are matched with it. Throws ferry::Error naming tensor and shard for a shape mismatch, and
/// listing every tensor still missing at the end; warns once about unexpected tensors.
void load_resident_weights(CausalLM& model, const io::CheckpointFiles& files,
                           const LoadProgressCallback& on_progress = {});

}  // namespace ferry::models::detail
