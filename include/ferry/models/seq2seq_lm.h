// Seq2SeqLM: what every encoder-decoder language model in ferry offers (transformers' *ForConditionalGeneration
// loaded by AutoModelForSeq2SeqLM) — the encoder run once over the input, the decoder run per generated token
// against its own KV cache and the encoder's keys/values (computed once per sequence and kept in the cache).
//
// Legend: S = input (encoder) tokens, T = new decoder tokens, C = d_model, V = vocab size.
//
// Forward contract (HF names; call through operator() so hooks run):
//   "input_ids":          i64 [S] — the encoder's input; runs the encoder (unless "encoder_outputs" is given)
//   "encoder_outputs":    f32 [S, C] — the encoder's last hidden state from an earlier forward (or encode())
//   "decoder_input_ids":  i64 [T] — the new decoder tokens (the first forward: decoder_start_token_id)
//   "past_key_values":    an EncoderDecoderCache Value (cache_value(cache)); without one a fresh cache is used
//   "logits_to_keep":     int; 0 = logits for every decoder position, n = the last n
// returns Dict{"logits": f32 [T', V], "encoder_last_hidden_state": [S, C], "past_key_values": the cache}.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ferry/models/kv_cache.h"
#include "ferry/models/language_model.h"
#include "ferry/nn/module.h"

namespace ferry::models {

/// transformers' EncoderDecoderCache: the decoder's self-attention KvCache plus, per decoder layer, the keys and
/// values of the encoder output (cross-attention), computed at the first forward and reused after.
class EncoderDecoderCache {
 public:
  explicit EncoderDecoderCache(int64_t num_decoder_layers);
  KvCache& self_attention() noexcept { return self_; }
  /// The cross-attention keys and values of `layer` ([S, H, D] each), or a pair of undefined tensors before the
  /// first forward computed them.
  const std::pair<Tensor, Tensor>& cross(int64_t layer) const;
  void set_cross(int64_t layer, Tensor keys, Tensor values);
  /// Decoder tokens held (the self-attention cache's length).
  int64_t seq_length() const { return self_.seq_length(); }

 private:
  KvCache self_;
  std::vector<std::pair<Tensor, Tensor>> cross_;
};

nn::Value cache_value(std::shared_ptr<EncoderDecoderCache> cache);
/// The EncoderDecoderCache given as "past_key_values", or nullptr when none was given; ferry::Error when the
/// argument holds something else.
std::shared_ptr<EncoderDecoderCache> encoder_decoder_cache_from_args(const nn::Args& args, std::string_view where);

/// Several sequences through the decoder in one forward (batched generation): the rows of decoder_input_ids are
/// each sequence's new tokens back to back, and each sequence has its own EncoderDecoderCache and encoder output,
/// so sequences of any input and output lengths share the decoder's linear layers. Passed as "past_key_values".
class Seq2SeqBatch {
 public:
  struct Sequence {
    std::shared_ptr<EncoderDecoderCache> cache;
    Tensor encoder_outputs;  // [S_i, C], from encode()
    int64_t tokens = 1;      // new decoder tokens of this sequence in this forward
  };
  /// Throws ferry::Error for an empty batch, a null cache, an undefined encoder output, tokens < 1 or a shared cache.
  explicit Seq2SeqBatch(std::vector<Sequence> sequences);
  int64_t size() const noexcept { return static_cast<int64_t>(sequences_.size()); }
  const Sequence& operator[](int64_t i) const { return sequences_[static_cast<std::size_t>(i)]; }
  int64_t offset(int64_t i) const { return offsets_[static_cast<std::size_t>(i)]; }
  int64_t total_tokens() const noexcept { return offsets_.back(); }

 private:
  std::vector<Sequence> sequences_;
  std::vector<int64_t> offsets_;
};

nn::Value batch_value(std::shared_ptr<Seq2SeqBatch> batch);
/// The Seq2SeqBatch given as "past_key_values", or nullptr.
std::shared_ptr<Seq2SeqBatch> seq2seq_batch_from_args(const nn::Args& args);

/// LanguageModelInfo plus the encoder's size and the config's EOS ids. T5's names: d_model = hidden_size, num_heads
/// = num_attention_heads = num_key_value_heads, d_kv = head_dim, num_decoder_layers = num_cached_layers.
struct Seq2SeqLMInfo : LanguageModelInfo {
  int64_t num_layers = 0;  // the encoder's
  std::vector<int64_t> eos_token_ids;

  int64_t num_decoder_layers() const noexcept { return num_cached_layers; }
};

/// An encoder-decoder language model. Through LanguageModel, starting a sequence runs the encoder; the state holds
/// the encoder output and the EncoderDecoderCache, and forwards run the decoder.
class Seq2SeqLM : public LanguageModel {
 public:
  const Seq2SeqLMInfo& info() const noexcept { return info_; }
  std::shared_ptr<EncoderDecoderCache> make_cache() const {
    return std::make_shared<EncoderDecoderCache>(info_.num_decoder_layers());
  }
  /// The encoder's last hidden state for input_ids [S] → f32 [S, C], through the model's forward (hooks run).
  Tensor encode(const Tensor& input_ids);
  /// Decoder logits for decoder_ids [T] given the encoder output; the cache keeps both attentions' keys/values.
  ///   Tensor enc = model->encode(ids);
  ///   auto cache = model->make_cache();
  ///   Tensor logits = model->decode(start_ids, enc, cache, 1);   // [1, V]
  Tensor decode(const Tensor& decoder_ids, const Tensor& encoder_outputs,
                const std::shared_ptr<EncoderDecoderCache>& cache, int64_t logits_to_keep = 0);
  /// The same for a batch: decoder_ids holds batch[i].tokens ids of each sequence in turn; returns each sequence's
  /// last min(logits_to_keep, tokens) rows (all for 0), in batch order.
  Tensor decode(const Tensor& decoder_ids, const Seq2SeqBatch& batch, int64_t logits_to_keep = 0);

  /// Encodes the prompt now; the decoder's KV cache is f32 whatever kv_dtype asks (its cross-attention keys are too).
  SequenceStart start_sequence(std::span<const int64_t> prompt_ids, DType kv_dtype,
                               int64_t reserve_tokens = 0) override;
  /// One row: decode(ids, encoder_outputs, cache); several: a Seq2SeqBatch.
  Tensor forward_step(const Tensor& input_ids, std::span<const StepRow> rows, int64_t logits_to_keep) override;

 protected:
  explicit Seq2SeqLM(Seq2SeqLMInfo info);

 private:
  Seq2SeqLMInfo info_;
};

}  // namespace ferry::models
