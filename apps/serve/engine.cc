// The serving engine: a BatchGenerator on its own thread (engine.h).
#include "serve/engine.h"

#include <limits>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"

namespace ferry::serve {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------------------------
// RequestStream

RequestStream::Wait RequestStream::next(std::string& out, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_until(lock, deadline, [&] { return !pending_.empty() || finished_; })) return Wait::Timeout;
  if (!pending_.empty()) {
    out += pending_;
    pending_.clear();
    return Wait::Text;
  }
  return Wait::Finished;
}

bool RequestStream::wait_finished(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  return cv_.wait_until(lock, deadline, [&] { return finished_; }) && finished_at_ <= deadline;
}

Clock::time_point RequestStream::finished_at() const {
  std::lock_guard lock(mutex_);
  return finished_at_;
}

void RequestStream::cancel() {
  if (cancelled_.exchange(true)) return;
  std::function<void()> tell;
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    tell = on_cancel_;
  }
  if (tell) tell();
}

Clock::time_point RequestStream::first_token_time() const {
  std::lock_guard lock(mutex_);
  return first_token_;
}

bool RequestStream::on_token(std::string_view text, text::TokenId id) {
  {
    std::lock_guard lock(mutex_);
    if (id != text::kEndOfText && first_token_ == Clock::time_point{}) first_token_ = Clock::now();
    pending_.append(text);
  }
  cv_.notify_all();
  return !cancelled_.load();
}

void RequestStream::finish(text::SequenceResult r, bool server_failed) {
  {
    std::lock_guard lock(mutex_);
    result_ = std::move(r);
    server_failed_ = server_failed;
    finished_ = true;
    finished_at_ = Clock::now();
    on_cancel_ = nullptr;
  }
  cv_.notify_all();
}

// ---------------------------------------------------------------------------------------------------------------
// Engine

int64_t sequence_context(const models::LanguageModel& model, int64_t requested) {
  int64_t context = model.context_length();
  if (requested > 0) context = std::min(context, requested);
  return context;
}

Engine::Engine(models::LanguageModel& model, const text::Tokenizer* tokenizer, EngineOptions options)
    : model_(model), tokenizer_(tokenizer), options_(std::move(options)),
      context_(sequence_context(model, options_.context)) {
  generator_ = make_generator();
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  fail_all("the server stopped");
}

std::unique_ptr<text::BatchGenerator> Engine::make_generator() const {
  return std::make_unique<text::BatchGenerator>(model_, tokenizer_, options_.batch);
}

std::shared_ptr<RequestStream> Engine::submit(std::vector<text::TokenId> prompt_ids, text::GenerateOptions options) {
  auto stream = std::make_shared<RequestStream>();
  std::lock_guard lock(mutex_);
  if (draining_ || stopping_) {
    ++stats_.refused;
    throw ApiError(503, "the server is shutting down", "server_error", {}, "server_shutting_down");
  }
  const auto in_flight = static_cast<int64_t>(streams_.size());
  if (in_flight >= options_.batch.max_batch_size + options_.max_queue) {
    ++stats_.refused;
    throw ApiError(503,
                   "the server is busy: " + std::to_string(in_flight) + " requests are running or queued (--max-batch " +
                       std::to_string(options_.batch.max_batch_size) + " + --max-queue " +
                       std::to_string(options_.max_queue) + "); retry later",
                   "server_error", {}, "queue_full");
  }
  std::weak_ptr<RequestStream> weak = stream;
  const text::SequenceId id = generator_->add(std::move(prompt_ids), std::move(options),
                                              [weak](std::string_view t, text::TokenId tok) {
                                                auto s = weak.lock();
                                                return s ? s->on_token(t, tok) : false;
                                              });
  stream->on_cancel_ = [this, id] {
    std::lock_guard l(mutex_);
    generator_->cancel(id);
    cv_.notify_all();
  };
  streams_[id] = stream;
  ++stats_.submitted;
  cv_.notify_all();
  return stream;
}

void Engine::drain() {
  std::lock_guard lock(mutex_);
  draining_ = true;
}

void Engine::cancel_all() {
  std::lock_guard lock(mutex_);
  for (auto& [id, s] : streams_) {
    s->cancelled_ = true;
    generator_->cancel(id);
  }
  cv_.notify_all();
}

bool Engine::draining() const {
  std::lock_guard lock(mutex_);
  return draining_ || stopping_;
}

bool Engine::idle() const {
  std::lock_guard lock(mutex_);
  return streams_.empty();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mutex_);
  EngineStats s = stats_;
  s.waiting = generator_->waiting();  // thread-safe; running and kv_cache_bytes are set by the engine thread
  return s;
}

void Engine::fail_all(const std::string& why) {
  std::map<text::SequenceId, std::shared_ptr<RequestStream>> streams;
  {
    std::lock_guard lock(mutex_);
    streams.swap(streams_);
    stats_.failed += streams.size();
  }
  for (auto& [id, s] : streams) {
    text::SequenceResult r;
    r.id = id;
    r.error = why;
    s->finish(std::move(r), true);
  }
}

void Engine::loop() {
  while (true) {
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || generator_->has_work(); });
      if (stopping_) return;
    }
    std::vector<text::SequenceResult> finished;
    const auto t0 = Clock::now();
    try {
      finished = generator_->step();
    } catch (const std::exception& e) {
      // A forward failed (a disk read error, out of memory): the batch's state is unknown, so every sequence in it
      // fails with the reason and a fresh generator serves the next requests.
      log_message(LogLevel::Error, std::string("serve: a forward failed, failing the running requests: ") + e.what());
      fail_all(std::string("the model failed: ") + e.what());
      std::lock_guard lock(mutex_);
      generator_ = make_generator();
      stats_.running = 0;
      stats_.kv_cache_bytes = 0;
      continue;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<std::pair<std::shared_ptr<RequestStream>, text::SequenceResult>> done;
    {
      std::lock_guard lock(mutex_);
      // The sequences this step carried: those still running plus those it finished.
      const int64_t rows = generator_->running() + static_cast<int64_t>(finished.size());
      if (rows > 0) {
        ++stats_.steps;
        stats_.step_rows += static_cast<uint64_t>(rows);
        stats_.last_batch = rows;
        stats_.step_seconds += seconds;
      }
      stats_.running = generator_->running();
      stats_.kv_cache_bytes = generator_->kv_cache_bytes_reserved();
      for (auto& r : finished) {
        auto it = streams_.find(r.id);
        if (it == streams_.end()) continue;
        if (!r.ok()) ++stats_.failed;
        else if (r.result.stop_reason == text::StopReason::Cancelled) ++stats_.cancelled;
        else ++stats_.completed;
        stats_.prompt_tokens += r.result.prompt_ids.size();
        stats_.generated_tokens += r.result.generated_ids.size();
        stats_.proposed_tokens += r.result.speculative.proposed;
        stats_.accepted_tokens += r.result.speculative.accepted;
        done.emplace_back(std::move(it->second), std::move(r));
        streams_.erase(it);
      }
    }
    for (auto& [stream, r] : done) stream->finish(std::move(r));
  }
}

}  // namespace ferry::serve
