// CausalLM: what every decoder-only language model in ferry offers (transformers' *ForCausalLM classes) — one forward
// contract, a description of its shape for planners, and a KV cache factory.
//
// Legend: T = new tokens, T' = positions whose logits are returned, V = vocab size, C = hidden size.
//
// Forward contract (HF names; call through operator() so hooks run):
//   args[0] or "input_ids":  i64 [T] or [1, T] — the new tokens of one sequence, or of a batch back to back
//   "past_key_values":       a KvCache Value (cache_value(cache)), or a KvCacheBatch Value (batch_value(batch)):
//                            several sequences whose rows of input_ids follow each other (kv_cache.h); without
//                            one the forward uses a fresh cache
//   "position_ids":          i64 [T]; default: each sequence's cache length + 0..T_i-1
//   "logits_to_keep":        int; 0 (default) = logits for every position, n = the last n (of each sequence)
// returns Dict{"logits": f32 [T', V], "past_key_values": the cache or batch used}.
// A prompt is prefilled in one forward; decoding feeds one token at a time with the same cache. A batch mixes
// both: one sequence's prompt and other sequences' next tokens go through the linear layers together.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"
#include "ferry/models/kv_cache.h"
#include "ferry/models/language_model.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/module.h"

namespace ferry::models {

/// LanguageModelInfo plus where a decoder-only model's parts live, for loaders and device maps.
struct CausalLMInfo : LanguageModelInfo {
  std::string base_model_prefix;  // "model" or "transformer": the base model's attribute name
  std::string layers_prefix;      // "model.layers", "transformer.h"
  bool tie_word_embeddings = false;

  /// transformers' num_hidden_layers: every layer of a decoder-only model keeps keys and values.
  int64_t num_hidden_layers() const noexcept { return num_cached_layers; }
};

/// A decoder-only language model. Through LanguageModel, a sequence's state is its KvCache and its first forward
/// takes the whole prompt.
class CausalLM : public LanguageModel {
 public:
  const CausalLMInfo& info() const noexcept { return info_; }

  /// A cache with one slot per layer. dtype: storage of keys/values (f32, f16 or bf16).
  std::shared_ptr<KvCache> make_cache(DType dtype = DType::F32) const;

  /// Runs the model through operator() (so hooks run) and returns the logits f32 [T', V].
  ///   auto cache = model->make_cache();
  ///   Tensor all = model->logits(prompt, cache);                 // [T, V]
  ///   Tensor last = model->logits(next_token, cache, 1);         // [1, V]
  Tensor logits(const Tensor& input_ids, const std::shared_ptr<KvCache>& cache = nullptr,
                int64_t logits_to_keep = 0);
  /// The same for a batch: input_ids holds batch[i].tokens ids of each sequence in turn; returns the logits of
  /// each sequence's last min(logits_to_keep, tokens) positions (all for 0), in batch order.
  ///   KvCacheBatch batch({{cache_a, 5}, {cache_b, 1}});            // a's 5-token prompt, b's next token
  ///   Tensor last = model->logits(ids, batch, 1);                   // [2, V]: a's last row, then b's
  Tensor logits(const Tensor& input_ids, const KvCacheBatch& batch, int64_t logits_to_keep = 0);

  SequenceStart start_sequence(std::span<const int64_t> prompt_ids, DType kv_dtype,
                               int64_t reserve_tokens = 0) override;
  /// One row: the single-cache forward (logits(ids, cache)); several: a KvCacheBatch. On rank 0 of a pipeline, in
  /// micro-batches (PipelineLeader::forward).
  Tensor forward_step(const Tensor& input_ids, std::span<const StepRow> rows, int64_t logits_to_keep) override;

 protected:
  explicit CausalLM(CausalLMInfo info);

 private:
  Tensor local_step(const Tensor& input_ids, std::span<const StepRow> rows, int64_t logits_to_keep);

  CausalLMInfo info_;
};

/// The sizes a decoder-only config gives CausalLMInfo, in transformers' config names.
struct DecoderSizes {
  int64_t vocab_size = 0, hidden_size = 0, num_hidden_layers = 0, num_attention_heads = 0, num_key_value_heads = 0,
          head_dim = 0, max_position_embeddings = 0;
  bool tie_word_embeddings = false;
};

/// CausalLMInfo of a model laid out as LlamaForCausalLM: base model "model", layers "model.layers", every layer
/// cached; the rest (experts, other prefixes) is the caller's to change.
CausalLMInfo model_layers_info(std::string architecture, std::string model_type, std::string block_class,
                               const DecoderSizes& sizes);

/// The forward inputs of a base model (LlamaModel, GPT2Model, ...), parsed and checked once.
struct CausalLMInputs {
  Tensor input_ids;      // i64 [T]
  nn::Value cache;       // the KvCache or KvCacheBatch Value: the caller's, or a fresh KvCache
  Tensor position_ids;   // i64 [T], on input_ids' device
  int64_t max_context = 0;  // the longest sequence after this forward: cached + new tokens
};

/// Reads input_ids, past_key_values and position_ids as the forward contract above describes. `where` names the
/// module in errors (bad dtype or rank, T = 0, position_ids of another length).
CausalLMInputs parse_causal_lm_inputs(const nn::Args& args, int64_t num_layers, std::string_view where);

/// "logits_to_keep" from args (0 when absent); throws ferry::Error for a negative value.
int64_t logits_to_keep_arg(const nn::Args& args, std::string_view where);

/// A *ForCausalLM's forward (causal_lm.h's contract): `body` (returning {last_hidden_state, past_key_values}) on
/// args, the rows "logits_to_keep" keeps, then `head` -> {logits, past_key_values}. `where` names the model in errors.
nn::Value forward_through_head(nn::Module& body, nn::Module& head, const nn::Args& args, std::string_view where);

/// A *ForCausalLM's output head, registered on `owner` as "lm_head": Linear(in_features → vocab_size); with `tied`
/// (config.json's tie_word_embeddings) its weight is `embedding`'s own tensor, as transformers ties them.
std::shared_ptr<nn::Linear> register_lm_head(nn::Module& owner, const nn::Module& embedding, int64_t in_features,
                                             int64_t vocab_size, bool tied, DType dtype, bool bias = false);

/// The last `logits_to_keep` rows of hidden [T, C] (all of them for 0 or n ≥ T), a view.
/// HF: slice_logits_to_keep
Tensor slice_logits_to_keep(const Tensor& hidden, int64_t logits_to_keep);
/// The same for the forward's "past_key_values" in args: for a KvCacheBatch, the last logits_to_keep rows of each
/// sequence, gathered in batch order.
Tensor slice_logits_to_keep(const Tensor& hidden, int64_t logits_to_keep, const nn::Args& args);
/// The last min(logits_to_keep, tokens[i]) rows of each sequence of a flattened batch (hidden [Σ tokens, C], the
/// sequences' rows back to back), gathered in order; all rows for logits_to_keep ≤ 0. Shared by every batch form.
Tensor keep_last_rows_per_sequence(const Tensor& hidden, const std::vector<int64_t>& tokens, int64_t logits_to_keep);

/// The named tensor argument `name` of a submodule forward (position_ids, position_embeddings); throws
/// ferry::Error naming the module when absent.
const Tensor& required_tensor_kwarg(const nn::Args& args, std::string_view name, std::string_view where);

}  // namespace ferry::models
