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

// An encoder-decoder sequence's state: the encoder's output and the decoder's caches.
struct Seq2SeqState final : SequenceState {
  std::shared_ptr<EncoderDecoderCache> cache;
  Tensor encoder_outputs;
  int64_t length() const override { return cache->seq_length(); }
  void crop(int64_t length) override { cache->self_attention().crop(length); }  // cross-attention keeps the input's
};

const Seq2SeqState& state_of(const StepRow& row) {
  auto* s = dynamic_cast<const Seq2SeqState*>(row.state.get());
  if (s == nullptr)
    throw Error("a sequence state from another kind of model", "Seq2SeqLM::forward_step",
                "start each sequence with this model's start_sequence()");
  return *s;
}

}  // namespace

Seq2SeqLM::Seq2SeqLM(Seq2SeqLMInfo info) : LanguageModel(info), info_(std::move(info)) {}

SequenceStart Seq2SeqLM::start_sequence(std::span<const int64_t> prompt_ids, DType, int64_t reserve_tokens) {
  auto state = std::make_shared<Seq2SeqState>();
  std::vector<int64_t> prompt(prompt_ids.begin(), prompt_ids.end());
  state->encoder_outputs = encode(Tensor::from_vector(prompt, {static_cast<int64_t>(prompt.size())}));
  state->cache = make_cache();
  if (reserve_tokens > 0) state->cache->self_attention().reserve(reserve_tokens);
  return {std::move(state), first_input(prompt_ids)};
}

Tensor Seq2SeqLM::forward_step(const Tensor& input_ids, std::span<const StepRow> rows, int64_t logits_to_keep) {
  if (rows.size() == 1) {
    const Seq2SeqState& s = state_of(rows[0]);
    return decode(input_ids, s.encoder_outputs, s.cache, logits_to_keep);
  }
  std::vector<Seq2SeqBatch::Sequence> sequences;
  sequences.reserve(rows.size());
  for (const StepRow& row : rows) {
    const Seq2SeqState& s = state_of(row);
    sequences.push_back({s.cache, s.encoder_outputs, row.tokens});
  }
  return decode(input_ids, Seq2SeqBatch(std::move(sequences)), logits_to_keep);
}

Tensor Seq2SeqLM::encode(const Tensor& input_ids) {
  nn::Args args;
  args.with("input_ids", ids_on_model_device(*this, input_ids));
  return (*this)(std::move(args)).dict().at("encoder_last_hidden_state").tensor();
}

Tensor Seq2SeqLM::decode(const Tensor& decoder_ids, const Tensor& encoder_outputs,
                         const std::shared_ptr<EncoderDecoderCache>& cache, int64_t logits_to_keep) {
  nn::Args args;
  args.with("decoder_input_ids", ids_on_model_device(*this, decoder_ids)).with("encoder_outputs", encoder_outputs);
  if (cache) args.with("past_key_values", cache_value(cache));
  if (logits_to_keep != 0) args.with("logits_to_keep", logits_to_keep);
  return (*this)(std::move(args)).dict().at("logits").tensor();
}

Tensor Seq2SeqLM::decode(const Tensor& decoder_ids, const Seq2SeqBatch& batch, int64_t logits_to_keep) {
  nn::Args args;
  args.with("decoder_input_ids", ids_on_model_device(*this, decoder_ids))
      .with("past_key_values", batch_value(std::make_shared<Seq2SeqBatch>(batch)));
  if (logits_to_keep != 0) args.with("logits_to_keep", logits_to_keep);
  return (*this)(std::move(args)).dict().at("logits").tensor();
}

}  // namespace ferry::models
