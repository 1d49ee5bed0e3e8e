// The encoder-decoder contract (see include/ferry/models/seq2seq_lm.h): the cross-attention cache and the
// encode / decode shorthands.
#include "ferry/models/seq2seq_lm.h"

#include "ferry/core/error.h"
#include "ferry/nn/module_tensors.h"

namespace ferry::models {

EncoderDecoderCache::EncoderDecoderCache(int64_t num_decoder_layers)
    : self_(num_decoder_layers), cross_(static_cast<std::size_t>(num_decoder_layers)) {}

const std::pair<Tensor, Tensor>& EncoderDecoderCache::cross(int64_t layer) const {
  if (layer < 0 || layer >= static_cast<int64_t>(cross_.size()))
    throw Error("layer " + std::to_string(layer) + " out of range", "EncoderDecoderCache");
  return cross_[static_cast<std::size_t>(layer)];
}

void EncoderDecoderCache::set_cross(int64_t layer, Tensor keys, Tensor values) {
  if (layer < 0 || layer >= static_cast<int64_t>(cross_.size()))
    throw Error("layer " + std::to_string(layer) + " out of range", "EncoderDecoderCache");
  cross_[static_cast<std::size_t>(layer)] = {std::move(keys), std::move(values)};
}

nn::Value cache_value(std::shared_ptr<EncoderDecoderCache> cache) {
  if (!cache) return nn::Value();
  return nn::Object::make(std::move(cache), "EncoderDecoderCache");
}

std::shared_ptr<EncoderDecoderCache> encoder_decoder_cache_from_args(const nn::Args& args, std::string_view where) {
  const nn::Value* v = args.kwarg("past_key_values");
  if (v == nullptr || v->is_none()) return nullptr;
  if (!v->is_object() || !v->object().holds<EncoderDecoderCache>())
    throw Error("\"past_key_values\" must be an EncoderDecoderCache, got " + v->describe(), std::string(where),
                "Pass the cache made by the model's make_cache().");
  return v->object().get<EncoderDecoderCache>();
}

namespace {

// Ids go where the first weight is when the model has no hook to move them (moved whole to an accelerator).
Tensor ids_for(const nn::Module& model, const Tensor& ids) {
  if (!model.hook())
    if (const auto d = nn::first_parameter_device(model); d && d->is_accelerator() && ids.device() != *d)
      return ids.to(*d);
  return ids;
}

}  // namespace

Tensor Seq2SeqLM::encode(const Tensor& input_ids) {
  nn::Args args;
  args.with("input_ids", ids_for(*this, input_ids));
  return (*this)(std::move(args)).dict().at("encoder_last_hidden_state").tensor();
}

Tensor Seq2SeqLM::decode(const Tensor& decoder_ids, const Tensor& encoder_outputs,
                         const std::shared_ptr<EncoderDecoderCache>& cache, int64_t logits_to_keep) {
  nn::Args args;
  args.with("decoder_input_ids", ids_for(*this, decoder_ids)).with("encoder_outputs", encoder_outputs);
  if (cache) args.with("past_key_values", cache_value(cache));
  if (logits_to_keep != 0) args.with("logits_to_keep", logits_to_keep);
  return (*this)(std::move(args)).dict().at("logits").tensor();
}

}  // namespace ferry::models
