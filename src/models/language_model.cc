// The parts of LanguageModel (see include/ferry/models/language_model.h) that follow from its info: prompt checks,
// the length a sequence may reach and the cache bytes it then holds.
#include "ferry/models/language_model.h"

#include <algorithm>
#include <climits>

#include "ferry/core/error.h"
#include "ferry/models/kv_cache.h"
#include "ferry/nn/module_tensors.h"

namespace ferry::models {

ReadProfile LanguageModelInfo::read_profile() const {
  ReadProfile p;
  if (experts.num_experts > 0) {
    p.expert_classes = {experts.expert_class};
    p.routed_fraction = static_cast<double>(experts.experts_per_token) / static_cast<double>(experts.num_experts);
  }
  p.prompt_modules = prompt_modules;
  return p;
}

int64_t LanguageModelInfo::kv_cache_bytes_per_token(DType dtype) const {
  return models::kv_cache_bytes_per_token(num_key_value_heads, head_dim, dtype) * num_cached_layers;
}

int64_t LanguageModel::context_length() const noexcept {
  return info_.max_position_embeddings > 0 ? info_.max_position_embeddings : INT64_MAX;
}

void LanguageModel::check_prompt(std::span<const int64_t> prompt_ids) const {
  if (prompt_ids.empty()) throw Error("the prompt is empty", "generate", "give at least one token (e.g. BOS)");
  for (int64_t id : prompt_ids)
    if (id < 0 || id >= info_.vocab_size)
      throw Error("prompt token id " + std::to_string(id) + " is outside the vocabulary (size " +
                      std::to_string(info_.vocab_size) + ")",
                  "generate");
  if (info_.is_encoder_decoder) return;  // the prompt is the encoder's: no context limit on the decoder's side
  const int64_t context = context_length();
  if (static_cast<int64_t>(prompt_ids.size()) >= context)
    throw Error("the prompt has " + std::to_string(prompt_ids.size()) + " tokens but the model's context is " +
                    std::to_string(context) + ", leaving no room to generate",
                "generate", "shorten the prompt");
}

int64_t LanguageModel::max_length(int64_t prompt_tokens, int64_t max_new_tokens) const {
  const int64_t max_new = std::min<int64_t>(max_new_tokens, INT64_MAX / 2);
  if (info_.is_encoder_decoder) return 1 + max_new;  // the start token, then what the decoder generates
  return std::min(prompt_tokens + max_new, context_length());
}

std::vector<int64_t> LanguageModel::first_input(std::span<const int64_t> prompt_ids) const {
  if (info_.is_encoder_decoder) return {info_.decoder_start_token_id};
  return {prompt_ids.begin(), prompt_ids.end()};
}

std::size_t LanguageModel::sequence_cache_bytes(int64_t prompt_tokens, int64_t max_length, DType kv_dtype) const {
  if (info_.is_encoder_decoder)  // the decoder's keys and values, and the prompt's cross-attention ones (f32)
    return static_cast<std::size_t>(max_length + prompt_tokens) *
           static_cast<std::size_t>(info_.kv_cache_bytes_per_token(DType::F32));
  return static_cast<std::size_t>(max_length) * static_cast<std::size_t>(info_.kv_cache_bytes_per_token(kv_dtype));
}

Tensor ids_on_model_device(const nn::Module& model, const Tensor& ids) {
  if (!model.hook())
    if (const auto d = nn::first_parameter_device(model); d && d->is_accelerator() && ids.device() != *d)
      return ids.to(*d);
  return ids;
}

}  // namespace ferry::models
