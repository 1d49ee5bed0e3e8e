// BatchGenerator (see include/ferry/text/batch_generate.h): a waiting queue, the running batch, and one forward
// per step over the running sequences (LanguageModel::forward_step).
#include "ferry/text/batch_generate.h"

#include <algorithm>
#include <chrono>

#include "ferry/core/error.h"
#include "ferry/models/kv_cache.h"
#include "sequence_decoder.h"
#include "speculation.h"
#include "speculative_generate.h"

namespace ferry::text {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void sort_by_id(std::vector<SequenceResult>& results) {
  std::sort(results.begin(), results.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
}

}  // namespace

struct BatchGenerator::Sequence {
  SequenceId id = -1;
  std::vector<TokenId> prompt;
  GenerateOptions options;  // SequenceDecoder keeps a reference: the Sequence never moves (unique_ptr)
  std::string error;        // set by add() for a request that cannot run
  std::unique_ptr<detail::SequenceDecoder> decoder;
  std::shared_ptr<models::SequenceState> state;  // the model's, from admission to retirement
  std::vector<TokenId> input;  // the next forward's tokens: the prompt, then the next token (and proposals)
  std::unique_ptr<detail::Proposer> proposer;  // speculative decoding (options.speculative), from admission
  std::unique_ptr<detail::Speculation> speculation;
  int64_t max_length = 0;      // prompt + generated tokens allowed: up to max_new_tokens and the context
  std::size_t kv_bytes = 0;    // the cache at max_length
  bool prefilled = false;
  bool cancelled = false;
};

BatchGenerator::BatchGenerator(models::LanguageModel& model, const Tokenizer* tokenizer, BatchOptions options)
    : model_(model), tokenizer_(tokenizer), options_(options) {
  if (options_.max_batch_size < 1)
    throw Error("max_batch_size must be at least 1, got " + std::to_string(options_.max_batch_size), "BatchOptions");
  if (options_.max_step_tokens < 1)
    throw Error("max_step_tokens must be at least 1, got " + std::to_string(options_.max_step_tokens), "BatchOptions");
  // make_cache validates the dtype now rather than at the first step.
  (void)models::KvCache(0, options_.kv_cache_dtype);
}

BatchGenerator::~BatchGenerator() = default;

SequenceId BatchGenerator::add(std::vector<TokenId> prompt_ids, GenerateOptions options, TokenCallback on_token) {
  auto s = std::make_unique<Sequence>();
  s->prompt = std::move(prompt_ids);
  s->options = std::move(options);
  try {
    const auto prompt_len = static_cast<int64_t>(s->prompt.size());
    s->max_length = sequence_max_length(model_, s->prompt, s->options);
    s->kv_bytes = model_.sequence_cache_bytes(prompt_len, s->max_length, options_.kv_cache_dtype);
    if (options_.max_kv_cache_bytes > 0 && s->kv_bytes > options_.max_kv_cache_bytes)
      throw Error("its KV cache needs " + std::to_string(s->kv_bytes >> 20) + " MiB at " +
                      std::to_string(s->max_length) + " tokens, more than the whole budget of " +
                      std::to_string(options_.max_kv_cache_bytes >> 20) + " MiB",
                  "generate", "lower max_new_tokens, shorten the prompt, or raise the KV cache budget");
    if (s->options.speculative.draft) check_draft_model(*s->options.speculative.draft, model_);
    const std::vector<int64_t> first = model_.first_input(std::vector<int64_t>(s->prompt.begin(), s->prompt.end()));
    const std::vector<TokenId> start(first.begin(), first.end());
    s->decoder = std::make_unique<detail::SequenceDecoder>(tokenizer_, start, s->options, std::move(on_token));
  } catch (const Error& e) {
    s->error = e.what();
  }
  std::lock_guard lock(queue_mutex_);
  s->id = next_id_++;
  const SequenceId id = s->id;
  waiting_.push_back(std::move(s));
  return id;
}

SequenceId BatchGenerator::add(std::string_view prompt, GenerateOptions options, TokenCallback on_token) {
  if (!tokenizer_)
    throw Error("a text prompt needs a tokenizer", "BatchGenerator", "construct it with one, or add token ids");
  std::vector<TokenId> ids = tokenizer_->encode(prompt, options.add_special_tokens);
  return add(std::move(ids), std::move(options), std::move(on_token));
}

void BatchGenerator::cancel(SequenceId id) {
  std::lock_guard lock(queue_mutex_);
  cancelled_.push_back(id);
}

bool BatchGenerator::has_work() const {
  std::lock_guard lock(queue_mutex_);
  return !running_.empty() || !waiting_.empty();
}

int64_t BatchGenerator::waiting() const {
  std::lock_guard lock(queue_mutex_);
  return static_cast<int64_t>(waiting_.size());
}

SequenceResult BatchGenerator::retire(Sequence& s) {
  SequenceResult r;
  r.id = s.id;
  r.error = s.error;
  const std::optional<SpeculativeStats> speculative = s.speculation ? std::optional(s.speculation->stats())
                                                                    : std::nullopt;
  if (s.decoder) {
    if (s.cancelled) s.decoder->stop_early(StopReason::Cancelled);
    r.result = std::move(s.decoder->finish());
  } else {
    r.result.prompt_ids = s.prompt;
    r.result.timings.prompt_tokens = s.prompt.size();
    if (s.cancelled) r.result.stop_reason = StopReason::Cancelled;
  }
  // An encoder-decoder's SequenceDecoder saw the start token: the prompt is the encoder's input.
  r.result.prompt_ids = s.prompt;
  r.result.timings.prompt_tokens = s.prompt.size();
  if (speculative) r.result.speculative = *speculative;
  s.speculation.reset();
  s.proposer.reset();  // a draft model's sequence state goes with it
  if (s.state) {
    s.state.reset();
    kv_reserved_ -= s.kv_bytes;
  }
  return r;
}

std::vector<SequenceResult> BatchGenerator::admit(int64_t& step_tokens) {
  std::vector<SequenceResult> done;
  std::lock_guard lock(queue_mutex_);
  // Cancellations first: waiting ones leave now, running ones are marked and leave after this step's forward is
  // skipped for them.
  for (SequenceId id : cancelled_) {
    for (auto& s : running_)
      if (s->id == id) s->cancelled = true;
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
      if ((*it)->id == id) {
        (*it)->cancelled = true;
        done.push_back(retire(**it));
        waiting_.erase(it);
        break;
      }
  }
  cancelled_.clear();
  int64_t prompts = 0;
  while (!waiting_.empty() && running() < options_.max_batch_size) {
    Sequence& s = *waiting_.front();
    if (!s.error.empty()) {
      done.push_back(retire(s));
      waiting_.pop_front();
      continue;
    }
    const auto len = static_cast<int64_t>(s.prompt.size());
    if (prompts > 0 && step_tokens + len > options_.max_step_tokens) break;
    if (options_.max_kv_cache_bytes > 0 && kv_reserved_ + s.kv_bytes > options_.max_kv_cache_bytes) break;
    if (s.options.speculative.enabled()) {  // its proposers (a draft model starts its own sequence)
      try {
        s.proposer = detail::make_proposer(model_, std::vector<int64_t>(s.prompt.begin(), s.prompt.end()), s.options);
        s.speculation = std::make_unique<detail::Speculation>(*s.proposer,
                                                              detail::proposals_per_step(s.options.speculative));
      } catch (const Error& e) {
        s.error = e.what();
        done.push_back(retire(s));
        waiting_.pop_front();
        continue;
      }
    }
    // A decoder-only model's cache is allocated once, at the length counted; an encoder-decoder one runs its
    // encoder now.
    models::SequenceStart start = model_.start_sequence(std::vector<int64_t>(s.prompt.begin(), s.prompt.end()),
                                                        options_.kv_cache_dtype, s.max_length);
    s.state = std::move(start.state);
    s.input.assign(start.input.begin(), start.input.end());
    kv_reserved_ += s.kv_bytes;
    step_tokens += len;
    ++prompts;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  return done;
}

std::vector<SequenceResult> BatchGenerator::step() {
  int64_t step_tokens = static_cast<int64_t>(running_.size());
  std::vector<SequenceResult> done = admit(step_tokens);

  // Cancelled running sequences leave before the forward.
  for (auto it = running_.begin(); it != running_.end();) {
    if ((*it)->cancelled) {
      done.push_back(retire(**it));
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  if (running_.empty()) {
    sort_by_id(done);
    return done;
  }

  // Each running sequence's tokens: its prompt (admitted now), or its next token and, speculating, the proposals
  // after it; a speculating sequence needs the logits of all of them, the others of their last token.
  std::vector<int64_t> ids;
  std::vector<models::StepRow> rows;
  std::vector<int64_t> held;  // tokens each state held before this forward
  std::vector<bool> speculating;
  int64_t keep = 1;
  for (const auto& s : running_) {
    const bool spec = s->prefilled && s->speculation;
    if (spec) {
      const std::vector<TokenId>& proposals = s->speculation->propose(*s->decoder,
                                                                      s->max_length - s->decoder->length());
      s->input.insert(s->input.end(), proposals.begin(), proposals.end());
      keep = std::max(keep, static_cast<int64_t>(s->input.size()));
    }
    speculating.push_back(spec);
    held.push_back(s->state->length());
    ids.insert(ids.end(), s->input.begin(), s->input.end());
    rows.push_back({s->state, static_cast<int64_t>(s->input.size())});
  }
  const auto t0 = Clock::now();
  const Tensor input = Tensor::from_vector(ids, {static_cast<int64_t>(ids.size())});
  Tensor logits = model_.forward_step(input, rows, keep);
  logits = logits.to(Device::cpu());
  const double seconds = seconds_since(t0);
  const float* data = logits.data<float>();
  const int64_t vocab = logits.size(1);

  std::vector<std::unique_ptr<Sequence>> still;
  int64_t offset = 0;  // the sequence's first logits row
  for (std::size_t i = 0; i < running_.size(); ++i) {
    Sequence& s = *running_[i];
    const int64_t kept_rows = std::min(keep, rows[i].tokens);
    const float* own = data + offset * vocab;
    offset += kept_rows;
    GenerateTimings& t = s.decoder->result().timings;
    (s.prefilled ? t.decode_seconds : t.prefill_seconds) += seconds;
    s.prefilled = true;
    std::optional<TokenId> next;
    if (speculating[i]) {
      next = s.speculation
                 ->verify(*s.decoder, own, static_cast<std::size_t>(vocab), s.max_length, *s.state, held[i], seconds)
                 .next;
    } else if (s.options.stop.max_new_tokens > 0) {
      next = s.decoder->accept(std::span<const float>(own + (kept_rows - 1) * vocab, static_cast<std::size_t>(vocab)));
      if (next && s.decoder->length() >= s.max_length) {
        // max_new_tokens is the stop checker's; reaching max_length before it means the context is full.
        s.decoder->stop_early(StopReason::MaxLength);
        next.reset();
      }
    }
    if (next) {
      s.input.assign(1, *next);
      still.push_back(std::move(running_[i]));
    } else {
      done.push_back(retire(s));
    }
  }
  running_ = std::move(still);
  sort_by_id(done);
  return done;
}

std::vector<SequenceResult> BatchGenerator::run() {
  std::vector<SequenceResult> all;
  while (has_work()) {
    auto done = step();
    std::move(done.begin(), done.end(), std::back_inserter(all));
  }
  sort_by_id(all);
  return all;
}

}  // namespace ferry::text
