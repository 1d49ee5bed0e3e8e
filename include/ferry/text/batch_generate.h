// BatchGenerator: many sequences generated together, one forward per step for all of them — continuous batching.
//
// Every step runs the prompts of newly admitted sequences and the next token of every running sequence through
// the model in one forward (a KvCacheBatch: rows back to back, no padding), so each weight is read — or, when
// offloaded, fetched from RAM or disk — once per step for the whole batch instead of once per sequence. A
// sequence leaves the batch the step it finishes and a waiting one takes its place; each has its own sampling
// settings and seed, stop criteria, token callback and KV cache, and gives exactly the tokens generate() gives
// it alone (up to f32 rounding of the batched kernels, far below the gap between two tokens' logits). Decoder-only
// models (KvCacheBatch) and encoder-decoder models (Seq2SeqBatch: the encoder once per sequence, the decoders
// together). A sequence with speculative options (GenerateOptions::speculative) speculates on its own inside the
// batch: its next token and its proposals ride in the same forward as the others' tokens, and its acceptance, rollback
// and adaptive proposal count are its own (speculative.h).
//
// Hugging Face: there is no direct equivalent in transformers' generate (a padded batch runs in lock-step until
// its longest member ends); this is the continuous batching of TGI / vLLM (Orca, OSDI '22), which transformers'
// `generate_batch` / continuous-batching manager also offers.
//
//   text::BatchGenerator gen(*model, &tokenizer, {.max_batch_size = 32});
//   for (auto& p : prompts) gen.add(p, options);
//   for (auto& r : gen.run()) std::cout << r.result.text << "\n";   // in add order
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/text/generate.h"

namespace ferry::text {

struct BatchOptions {
  /// Sequences running at once (the batch of each decode step).
  int64_t max_batch_size = 32;
  /// Prompt tokens admitted into one step. A prompt longer than this still runs, alone among the new ones.
  int64_t max_step_tokens = 2048;
  /// Bytes the running sequences' KV caches may use together, counted for each sequence's longest possible
  /// length (prompt + max_new_tokens, up to the context); 0 = no limit. A sequence waits until enough running
  /// ones finished; one that could never fit fails with an error (the others go on).
  std::size_t max_kv_cache_bytes = 0;
  DType kv_cache_dtype = DType::F32;
};

using SequenceId = int64_t;

struct SequenceResult {
  SequenceId id = -1;
  GenerateResult result;  // what was generated (partial when error is set)
  std::string error;      // why the sequence failed; empty when it completed
  bool ok() const noexcept { return error.empty(); }
};

/// add() and cancel() may be called from any thread; step() and run() from one thread at a time.
class BatchGenerator {
 public:
  /// `tokenizer` may be null (token ids only). The model must outlive the generator. Decoder-only models run each
  /// admitted prompt and the running sequences' next tokens in one forward (a KvCacheBatch); encoder-decoder models
  /// (T5) run each admitted prompt through the encoder once, then the running decoders share one forward per step (a
  /// Seq2SeqBatch). The KV budget counts each sequence at its longest (LanguageModel::sequence_cache_bytes).
  BatchGenerator(models::LanguageModel& model, const Tokenizer* tokenizer, BatchOptions options = {});
  ~BatchGenerator();
  BatchGenerator(const BatchGenerator&) = delete;
  BatchGenerator& operator=(const BatchGenerator&) = delete;

  /// Queues a sequence and returns its id (0, 1, 2, ... in add order). A bad request (empty prompt, an id outside
  /// the vocabulary, a prompt that fills the context, bad sampling settings, a KV cache beyond the budget) does
  /// not throw: the sequence finishes at the next step with SequenceResult::error set.
  SequenceId add(std::vector<TokenId> prompt_ids, GenerateOptions options = {}, TokenCallback on_token = {});
  /// Encodes `prompt` with the tokenizer first (add_special_tokens from options); needs a tokenizer.
  SequenceId add(std::string_view prompt, GenerateOptions options = {}, TokenCallback on_token = {});
  /// Ends a waiting or running sequence at the next step (stop reason "cancelled"); unknown ids are ignored.
  void cancel(SequenceId id);

  /// One step: admits waiting sequences as the limits allow, runs one forward for every running sequence, samples
  /// their next tokens (calling their callbacks) and returns the sequences that finished, in id order. Does nothing
  /// and returns {} when there is no work. Errors of the forward itself (a failing disk read) propagate.
  std::vector<SequenceResult> step();
  /// Steps until every queued sequence finished; returns all results of this call in id order.
  std::vector<SequenceResult> run();

  bool has_work() const;
  int64_t running() const noexcept { return static_cast<int64_t>(running_.size()); }
  int64_t waiting() const;
  /// KV cache bytes the running sequences are counted for (see BatchOptions::max_kv_cache_bytes).
  std::size_t kv_cache_bytes_reserved() const noexcept { return kv_reserved_; }

 private:
  struct Sequence;
  std::vector<SequenceResult> admit(int64_t& step_tokens);
  SequenceResult retire(Sequence& s);

  models::LanguageModel& model_;
  const Tokenizer* tokenizer_;
  BatchOptions options_;
  mutable std::mutex queue_mutex_;  // guards waiting_, cancelled_ and next_id_
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<SequenceId> cancelled_;
  SequenceId next_id_ = 0;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::size_t kv_reserved_ = 0;
};

}  // namespace ferry::text
