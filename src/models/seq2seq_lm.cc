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

Seq2SeqBatch::Seq2SeqBatch(std::vector<Sequence> sequences) : sequences_(std::move(sequences)), offsets_{0} {
  if (sequences_.empty()) throw Error("a batch needs at least one sequence", "Seq2SeqBatch");
  for (std::size_t i = 0; i < sequences_.size(); ++i) {
    const Sequence& s = sequences_[i];
    const std::string where = "Seq2SeqBatch sequence " + std::to_string(i);
    if (!s.cache) throw Error("has no cache", where, "Give every sequence its own model->make_cache().");
    if (!s.encoder_outputs.defined() || s.encoder_outputs.dim() != 2)
      throw Error("needs its encoder output [S, C]", where, "Run model->encode() on its input first.");
    if (s.tokens < 1) throw Error("has " + std::to_string(s.tokens) + " new tokens; each needs at least one", where);
    for (std::size_t j = 0; j < i; ++j)
      if (sequences_[j].cache == s.cache)
        throw Error("shares its cache with sequence " + std::to_string(j), where, "Each sequence needs its own cache.");
    offsets_.push_back(offsets_.back() + s.tokens);
  }
}

nn::Value batch_value(std::shared_ptr<Seq2SeqBatch> batch) {
  if (!batch) return nn::Value();
  return nn::Object::make(std::move(batch), "Seq2SeqBatch");
}

std::shared_ptr<Seq2SeqBatch> seq2seq_batch_from_args(const nn::Args& args) {
  const nn::Value* v = args.kwarg("past_key_values");
  if (v == nullptr || !v->is_object() || !v->object().holds<Seq2SeqBatch>()) return nullptr;
  return v->object().get<Seq2SeqBatch>();
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

Tensor Seq2SeqLM::decode(const Tensor& decoder_ids, const Seq2SeqBatch& batch, int64_t logits_to_keep) {
  nn::Args args;
  args.with("decoder_input_ids", ids_for(*this, decoder_ids))
      .with("past_key_values", batch_value(std::make_shared<Seq2SeqBatch>(batch)));
  if (logits_to_keep != 0) args.with("logits_to_keep", logits_to_keep);
  return (*this)(std::move(args)).dict().at("logits").tensor();
}

}  // namespace ferry::models
