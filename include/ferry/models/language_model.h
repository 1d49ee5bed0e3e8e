// LanguageModel: the one interface every text model in ferry offers to generation, batching, the server, the CLI and
// the Python package — decoder-only (CausalLM, transformers' *ForCausalLM) and encoder-decoder (Seq2SeqLM,
// *ForConditionalGeneration) alike. Code that generates never asks which kind it holds: it starts sequences, runs
// forwards over one or several of them, and reads the facts planners need from model_info().
//
//   std::shared_ptr<LanguageModel> model = load_language_model(folder);   // auto_model.h: either kind
//   auto seq = model->start_sequence(prompt_ids, DType::F32, /*reserve_tokens=*/64);  // T5: runs the encoder now
//   Tensor logits = model->forward_step(token_ids(seq.input), {{seq.state, n}}, 1);  // [1, V]
//
// Legend: V = vocab size, C = hidden size (d_model).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <optional>

#include "ferry/big_modeling/device_map.h"
#include "ferry/big_modeling/token_reads.h"
#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"
#include "ferry/nn/module.h"

namespace ferry {
class ProcessGroup;
}

namespace ferry::models {

class PipelineLeader;

/// What loaders, planners, generation and `ferry inspect` need to know of any language model without reading its
/// modules (transformers: the shared fields of PretrainedConfig plus the class's _no_split_modules).
/// A mixture-of-experts model's experts, for planners, loaders and reports; num_experts 0: a dense model.
struct ExpertsInfo {
  int64_t num_experts = 0;         // per sparse layer
  int64_t experts_per_token = 0;   // num_experts_per_tok (top_k)
  int64_t sparse_layers = 0;       // layers with a sparse block
  std::string expert_class;        // one expert's module class ("MixtralBlockSparseTop2MLP"): a device-map unit
  std::string sparse_block_class;  // "MixtralSparseMoeBlock"
};

struct LanguageModelInfo {
  std::string architecture;  // the HF class: "LlamaForCausalLM", "T5ForConditionalGeneration", ...
  std::string model_type;    // config.json's model_type: "llama", "gpt2", "t5", ...
  std::string block_class;   // the repeated block's class, the default no_split_module_classes entry
  bool is_encoder_decoder = false;  // transformers' config.is_encoder_decoder
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;       // hidden_size / n_embd / d_model
  int64_t num_cached_layers = 0;  // layers that keep keys and values per token (a decoder's)
  int64_t num_attention_heads = 0, num_key_value_heads = 0, head_dim = 0;  // of those layers
  int64_t max_position_embeddings = 0;  // 0: no limit (relative positions, T5)
  int64_t decoder_start_token_id = -1;  // encoder-decoder models: the decoder's first input
  ExpertsInfo experts;                  // mixtures of experts
  /// Modules that run once per prompt, not per generated token: T5's encoder and its decoder's cross-attention key
  /// and value projections (the keys and values are computed once and cached). PlanOptions::prompt_modules.
  std::vector<std::string> prompt_modules;

  /// What generation reads per token of each module: the experts at top_k / E, the prompt modules once per prompt.
  ReadProfile read_profile() const;

  /// Bytes one token adds to the KV cache over all cached layers, stored as `dtype`.
  int64_t kv_cache_bytes_per_token(DType dtype = DType::F32) const;
};

/// One sequence's state between forwards, opaque to generation loops: a decoder-only model's KvCache; an
/// encoder-decoder model's decoder cache, encoder output and cross-attention keys and values. One state belongs to
/// one sequence and one model.
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  /// Decoder tokens held (prompt and generated tokens for a decoder-only model; the start token and generated
  /// ones for an encoder-decoder model).
  virtual int64_t length() const = 0;
  /// Forgets the decoder tokens past the first `length` (a longer length is a no-op), without copying: the next
  /// forward_step continues from there. Speculative decoding rolls back rejected proposals with it. HF:
  /// DynamicCache.crop
  virtual void crop(int64_t length) = 0;
};

/// A sequence just started: its state, and the tokens its first forward takes.
struct SequenceStart {
  std::shared_ptr<SequenceState> state;
  std::vector<int64_t> input;  // decoder-only: the prompt; encoder-decoder: {decoder_start_token_id}
};

/// One sequence of a forward_step: its state and how many of the forward's input rows are its new tokens.
struct StepRow {
  std::shared_ptr<SequenceState> state;
  int64_t tokens = 1;
};

class LanguageModel : public nn::Module {
 public:
  /// The facts shared by every kind (CausalLM::info() and Seq2SeqLM::info() hold each kind's own).
  const LanguageModelInfo& model_info() const noexcept { return info_; }

  /// The most tokens a sequence may hold: max_position_embeddings, INT64_MAX when the model has no limit.
  int64_t context_length() const noexcept;
  /// Throws ferry::Error (where: "generate") for an empty prompt, an id outside the vocabulary, or — decoder-only —
  /// a prompt that fills the context, leaving no room for one generated token.
  void check_prompt(std::span<const int64_t> prompt_ids) const;
  /// The most decoder tokens a sequence of this prompt holds when it generates up to max_new_tokens: decoder-only,
  /// prompt + max_new_tokens capped by the context; encoder-decoder, the start token + max_new_tokens.
  int64_t max_length(int64_t prompt_tokens, int64_t max_new_tokens) const;
  /// Bytes of KV cache such a sequence holds at `max_length` decoder tokens, stored as `kv_dtype` (encoder-decoder
  /// models also keep the prompt's cross-attention keys and values, in f32).
  std::size_t sequence_cache_bytes(int64_t prompt_tokens, int64_t max_length, DType kv_dtype) const;

  /// The decoder tokens a sequence of this prompt starts from: decoder-only, the prompt; encoder-decoder,
  /// {decoder_start_token_id} (SequenceStart::input).
  std::vector<int64_t> first_input(std::span<const int64_t> prompt_ids) const;

  /// Starts a sequence with room reserved for `reserve_tokens` decoder tokens (0: grow as needed). Decoder-only:
  /// a fresh KV cache, input = the prompt. Encoder-decoder: runs the encoder over the prompt now (through the
  /// model's forward, hooks and all), input = {decoder_start_token_id}. HF: the first step of generate().
  virtual SequenceStart start_sequence(std::span<const int64_t> prompt_ids, DType kv_dtype,
                                       int64_t reserve_tokens = 0) = 0;
  /// One forward over the new tokens of one or several sequences: `input_ids` i64 [Σ tokens] holds rows[i].tokens
  /// ids of each sequence in turn. Returns f32 [Σ min(logits_to_keep, tokens), V] — each sequence's last
  /// logits_to_keep rows (all for 0), in row order. Each state must come from this model's start_sequence.
  virtual Tensor forward_step(const Tensor& input_ids, std::span<const StepRow> rows, int64_t logits_to_keep) = 0;

  /// The device map the model was loaded with — the one that ran, not planned again: {"": cpu} for a resident load;
  /// nullopt for a model built by from_config. Set by from_pretrained. HF: model.hf_device_map
  const std::optional<DeviceMap>& hf_device_map() const noexcept { return hf_device_map_; }
  void set_hf_device_map(DeviceMap map) { hf_device_map_ = std::move(map); }

  /// The pipeline this model leads (rank 0 of a device map over ranks, pipeline.h), or nullptr; its process group
  /// for a follower. Set by from_pretrained.
  const std::shared_ptr<PipelineLeader>& pipeline_leader() const noexcept { return pipeline_leader_; }
  void set_pipeline_leader(std::shared_ptr<PipelineLeader> leader) { pipeline_leader_ = std::move(leader); }
  const std::shared_ptr<ProcessGroup>& pipeline_group() const noexcept { return pipeline_group_; }
  void set_pipeline_group(std::shared_ptr<ProcessGroup> group) { pipeline_group_ = std::move(group); }

 protected:
  explicit LanguageModel(LanguageModelInfo info) : info_(std::move(info)) {}

 private:
  LanguageModelInfo info_;
  std::optional<DeviceMap> hf_device_map_;
  std::shared_ptr<PipelineLeader> pipeline_leader_;
  std::shared_ptr<ProcessGroup> pipeline_group_;
};

/// Ids where the model's first weight is when it has no hook to move them (a model moved whole onto an
/// accelerator), as transformers' generate sends input_ids to model.device; dispatched models' hooks move them.
Tensor ids_on_model_device(const nn::Module& model, const Tensor& ids);

}  // namespace ferry::models
