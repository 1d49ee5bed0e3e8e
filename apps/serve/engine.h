// Engine: one model shared by every client — a text::BatchGenerator stepped by its own thread.
//
// HTTP handlers submit() requests from any thread; the engine thread admits them into the running batch between
// steps (continuous batching: one forward per step for every running sequence, so offloaded weights are fetched
// once per step for all clients), and hands each token's text to the request's RequestStream as soon as it is
// sampled. A handler whose client went away cancels its stream: the sequence leaves the batch at the next step and
// its KV cache is freed there. The queue is bounded: beyond max_batch_size running + max_queue waiting requests,
// submit() refuses with 503 and a Retry-After hint.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ferry/text/batch_generate.h"
#include "serve/api_error.h"

namespace ferry::serve {

struct EngineOptions {
  text::BatchOptions batch;  // max_batch_size, max_kv_cache_bytes, kv_cache_dtype
  int64_t max_queue = 64;    // requests waiting beyond the running batch before 503
  int64_t context = 0;       // tokens a sequence may hold (prompt + generated); 0 = the model's maximum
};

/// Tokens a sequence may hold (prompt + generated) when serving `model` with EngineOptions::context = `requested`
/// (0: the model's own context, LanguageModel::context_length — INT64_MAX for an encoder-decoder model, whose
/// relative positions have no limit). The engine's context(); the CLI sizes the KV budget with it before the engine
/// exists.
int64_t sequence_context(const models::LanguageModel& model, int64_t requested);

/// One request's tokens, from the engine thread to the handler that streams them. Thread-safe.
class RequestStream {
 public:
  enum class Wait { Text, Finished, Timeout };
  /// Waits until text arrives (appended to `out`), the sequence finished (after its last text was taken), or
  /// `deadline` passed (a wake-up time: whether the request met its own deadline is finished_at()'s to say).
  Wait next(std::string& out, std::chrono::steady_clock::time_point deadline);
  /// Blocks until finished or `deadline`; true when the sequence finished at or before `deadline` (finished_at()),
  /// false otherwise — also when it finished later but before the caller looked: whether a request met its
  /// deadline depends on when it finished, never on when its handler woke up.
  bool wait_finished(std::chrono::steady_clock::time_point deadline);
  /// When the sequence finished (steady clock); time_point{} while it runs.
  std::chrono::steady_clock::time_point finished_at() const;
  /// The sequence's result, once next() returned Finished (error set when it failed).
  const text::SequenceResult& result() const { return result_; }
  /// The sequence failed because the model did (a forward threw), not because of the request.
  bool server_failed() const noexcept { return server_failed_; }
  /// The client is gone, timed out or the server stops: ends the sequence at the next step.
  void cancel();
  bool cancelled() const noexcept { return cancelled_.load(); }
  /// When the first token was sampled (steady clock), for time-to-first-token figures.
  std::chrono::steady_clock::time_point first_token_time() const;

 private:
  friend class Engine;
  bool on_token(std::string_view text, text::TokenId id);
  void finish(text::SequenceResult r, bool server_failed = false);

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::string pending_;
  bool finished_ = false, server_failed_ = false;
  text::SequenceResult result_;
  std::atomic<bool> cancelled_{false};
  std::chrono::steady_clock::time_point first_token_{}, finished_at_{};
  std::function<void()> on_cancel_;  // tells the engine
};

/// Counters for /metrics (monotonic unless marked as a gauge).
struct EngineStats {
  uint64_t submitted = 0, completed = 0, cancelled = 0, failed = 0, refused = 0;
  uint64_t prompt_tokens = 0, generated_tokens = 0;
  uint64_t proposed_tokens = 0, accepted_tokens = 0;  // speculative decoding, finished sequences
  uint64_t steps = 0, step_rows = 0;  // forwards, and the sequences they carried (average batch = rows / steps)
  double step_seconds = 0;            // time inside forwards
  int64_t running = 0, waiting = 0;   // gauges
  int64_t last_batch = 0;             // gauge: sequences in the last step
  std::size_t kv_cache_bytes = 0;     // gauge: KV bytes the running sequences are counted for
};

class Engine {
 public:
  /// `model` (decoder-only or encoder-decoder) and `tokenizer` (may be null) must outlive the engine.
  Engine(models::LanguageModel& model, const text::Tokenizer* tokenizer, EngineOptions options);
  ~Engine();  // cancels what is left and joins the thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Queues a sequence. Throws ApiError 503 when the queue is full or the engine is draining.
  std::shared_ptr<RequestStream> submit(std::vector<text::TokenId> prompt_ids, text::GenerateOptions options);
  /// New requests are refused from now on (503); running ones go on.
  void drain();
  /// Cancels every queued and running sequence.
  void cancel_all();
  bool draining() const;
  /// No sequence queued or running.
  bool idle() const;
  EngineStats stats() const;
  /// Requests the engine holds at once: max_batch_size running + max_queue waiting (more are refused with 503).
  int64_t max_requests() const noexcept { return options_.batch.max_batch_size + options_.max_queue; }
  /// Tokens a sequence may hold (prompt + generated); INT64_MAX when unlimited (encoder-decoder models).
  int64_t context() const noexcept { return context_; }
  bool is_seq2seq() const noexcept { return model_.model_info().is_encoder_decoder; }
  const text::Tokenizer* tokenizer() const noexcept { return tokenizer_; }

 private:
  std::unique_ptr<text::BatchGenerator> make_generator() const;
  void loop();
  void fail_all(const std::string& why);

  models::LanguageModel& model_;
  const text::Tokenizer* tokenizer_;
  EngineOptions options_;
  int64_t context_;

  mutable std::mutex mutex_;  // guards everything below but the generator's own state
  std::condition_variable cv_;
  std::unique_ptr<text::BatchGenerator> generator_;
  std::map<text::SequenceId, std::shared_ptr<RequestStream>> streams_;
  EngineStats stats_;
  bool draining_ = false, stopping_ = false;
  std::thread thread_;
};

}  // namespace ferry::serve
