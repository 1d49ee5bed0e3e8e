// from_pretrained's resident path: checkpoint shards -> a cpu-resident model, tensor by tensor through
// set_module_tensor_to_device (so ties hold and dtype casts happen once, at load).
#include "resident_loading.h"

#include <string>
#include <string_view>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/nn/module_tensors.h"

namespace ferry::models::detail {

namespace {

// Buffers that older checkpoints saved and today's transformers drops on load (its
// _keys_to_ignore_on_load_unexpected): GPT-2 / GPT-J causal-mask buffers, Llama's per-layer rotary inv_freq.
bool is_stale_buffer(std::string_view key) {
  // (and T5's decoder cross-attention bias, which transformers never builds)
  for (std::string_view suffix : {".attn.bias", ".attn.masked_bias", "crossattention.bias", "rotary_emb.inv_freq",
                                  "EncDecAttention.relative_attention_bias.weight"}) {
    if (key.size() >= suffix.size() && key.substr(key.size() - suffix.size()) == suffix) return true;
  }
  return key == "attn.bias" || key == "attn.masked_bias";
}

}  // namespace

ResidentLoader::ResidentLoader(CausalLM& model) : ResidentLoader(model, model.info().base_model_prefix) {}

ResidentLoader::ResidentLoader(nn::Module& model, const std::string& base_model_prefix)
    : model_(model), prefix_(base_model_prefix.empty() ? "" : base_model_prefix + ".") {
  for (const auto& [name, tensor] : model.state_dict()) expected_.insert(name);
}

void ResidentLoader::place(const std::string& key, const Tensor& value, const std::string& where) {
  std::string name = key;
  // A checkpoint of the bare base model (GPT2Model) names "h.0..." what the LM head model calls "transformer.h.0...".
  if (!expected_.count(name) && !prefix_.empty() && expected_.count(prefix_ + key)) name = prefix_ + key;
  if (!expected_.count(name)) {
    if (!is_stale_buffer(key)) unexpected_.push_back(key);
    return;
  }
  try {
    nn::set_module_tensor_to_device(model_, name, Device::cpu(), value);
  } catch (const Error& e) {
    throw Error(e.kind(), e.problem(), where + ": " + key, "Are config.json and the weights from the same model?");
  }
}

void ResidentLoader::finish(const std::string& source, const std::string& hint) const {
  std::vector<std::string> missing;
  for (const auto& [name, tensor] : model_.state_dict()) {
    if (tensor.is_meta()) missing.push_back(name);
  }
  if (!missing.empty()) {
    throw Error("the checkpoint lacks " + std::to_string(missing.size()) + " tensor(s) " + model_.type_name() +
                    " needs: " + list_for_error(missing),
                source, hint);
  }
  if (!unexpected_.empty()) {
    log_warning("{}: {} checkpoint tensor(s) are not used by {}: {}", source, unexpected_.size(), model_.type_name(),
                list_for_error(unexpected_));
  }
}

void load_resident_weights(CausalLM& model, const io::CheckpointFiles& files, const LoadProgressCallback& on_progress) {
  load_resident_weights(model, model.info().base_model_prefix, files, on_progress);
}

void load_resident_weights(nn::Module& model, const std::string& base_model_prefix, const io::CheckpointFiles& files,
                           const LoadProgressCallback& on_progress) {
  ResidentLoader loader(model, base_model_prefix);
  LoadProgress progress;
  progress.shard_count = files.shards.size();
  if (on_progress)
    for (const auto& shard : files.shards) progress.bytes_total += std::filesystem::file_size(shard);
  for (const auto& shard : files.shards) {
    const io::StateDict tensors = io::load_state_dict(shard);
    ++progress.shard_index;
    progress.shard_name = shard.filename().string();
    progress.tensors_in_shard = tensors.size();
    progress.tensors_done = 0;
    for (const auto& [key, value] : tensors) {
      progress.bytes_done += value.nbytes();
      ++progress.tensors_done;
      if (on_progress) on_progress(progress);
      loader.place(key, value, progress.shard_name);
    }
  }
  loader.finish(files.folder.string(),
                "Are config.json and the weights from the same model? (transformers would initialise them randomly; "
                "ferry refuses.)");
}

}  // namespace ferry::models::detail
