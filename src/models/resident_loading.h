// Loading a checkpoint's tensors into a model skeleton that stays resident on the cpu (internal to ferry_models).
//
// This is the device_map=None / "cpu" path of from_pretrained; plans with other devices go through big_modeling's
// load_checkpoint_in_model + dispatch_model instead (auto_model.cc). Kept separate because it also accepts
// checkpoints of the bare base model and skips stale buffers silently, and refuses missing weights outright.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "ferry/big_modeling/load_checkpoint.h"
#include "ferry/io/checkpoint.h"
#include "ferry/models/causal_lm.h"

namespace ferry::models::detail {

/// Places checkpoint tensors, one by one, into a skeleton that stays on the cpu, and checks the result. Keys
/// without the base_model_prefix ("h.0.attn.c_attn.weight" for a GPT2LMHeadModel) are matched with it; stale
/// buffers are skipped silently, other unknown keys collected.
class ResidentLoader {
 public:
  explicit ResidentLoader(CausalLM& model);
  /// Any model whose bare base model's keys lack `base_model_prefix` ("transformer", "model"; "" for none).
  ResidentLoader(nn::Module& model, const std::string& base_model_prefix);
  /// Sets the tensor `key` names to `value` (cast to the skeleton's dtype). `where` names the source in errors
  /// (a shard, a GGUF file). Throws ferry::Error naming key and source for a shape mismatch.
  void place(const std::string& key, const Tensor& value, const std::string& where);
  /// Throws ferry::Error listing every tensor still on meta (naming `source`, with `hint`); warns once about the
  /// unexpected keys.
  void finish(const std::string& source, const std::string& hint) const;

 private:
  nn::Module& model_;
  std::string prefix_;
  std::unordered_set<std::string> expected_;  // parameters and persistent buffers, tied ones under every name
  std::vector<std::string> unexpected_;
};

/// Fills every parameter and persistent buffer of `model` (built under init_empty_weights, parameters already of
/// the target dtype) from `files`, shard by shard. safetensors tensors already of the target dtype stay zero-copy
/// views of the mapped file. Checkpoint keys without the base_model_prefix ("h.0.attn.c_attn.weight" for a
/// GPT2LMHeadModel) are matched with it. Throws ferry::Error naming tensor and shard for a shape mismatch, and
/// listing every tensor still missing at the end; warns once about unexpected tensors.
void load_resident_weights(CausalLM& model, const io::CheckpointFiles& files,
                           const LoadProgressCallback& on_progress = {});
void load_resident_weights(nn::Module& model, const std::string& base_model_prefix, const io::CheckpointFiles& files,
                           const LoadProgressCallback& on_progress = {});

}  // namespace ferry::models::detail
