// Rank 0 leads a pipeline's sequence calls, the other ranks follow them (models/pipeline.h).
#include "ferry/models/pipeline.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/models/pipeline_protocol.h"

namespace ferry::models {
namespace {

using namespace pipeline_protocol;

std::span<const std::byte> bytes(const Command& c) { return std::as_bytes(std::span(c)); }
std::span<std::byte> bytes(Command& c) { return std::as_writable_bytes(std::span(c)); }

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Row boundaries of `parts` consecutive groups of rows, each about the same number of tokens, none empty.
std::vector<std::size_t> split_rows(std::span<const int64_t> tokens, int parts) {
  int64_t total = 0;
  for (int64_t t : tokens) total += t;
  const std::size_t n = tokens.size();
  std::vector<std::size_t> cut{0};
  int64_t before = 0;
  for (std::size_t i = 0; i < n && static_cast<int>(cut.size()) < parts; ++i) {
    before += tokens[i];
    const std::size_t k = cut.size();  // the group that starts next
    const std::size_t left = n - (i + 1), groups_left = static_cast<std::size_t>(parts) - k;
    if (left >= groups_left && (before * parts >= static_cast<int64_t>(k) * total || left == groups_left))
      cut.push_back(i + 1);
  }
  cut.push_back(n);
  return cut;
}

}  // namespace

double PipelineTimes::bubble() const {
  if (forward_seconds <= 0 || ranks <= 0) return 0;
  double busy = 0;
  for (double b : busy_seconds) busy += b;
  return std::clamp(1.0 - busy / (forward_seconds * ranks), 0.0, 1.0);
}

// Threads that run micro-batches 1.. of a forward (the caller runs micro-batch 0): kept between forwards, so that
// their per-thread kernel scratch is allocated once.
class PipelineLeader::Workers {
 public:
  ~Workers() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  /// Runs jobs[1..] on the threads and jobs[0] here; returns when all are done.
  void run(std::vector<std::function<void()>> jobs) {
    while (threads_.size() + 1 < jobs.size()) {
      const std::size_t index = threads_.size();
      threads_.emplace_back([this, index] { loop(index); });
    }
    {
      std::lock_guard lock(mutex_);
      jobs_ = std::move(jobs);
      pending_ = jobs_.size() - 1;
      ++round_;
    }
    wake_.notify_all();
    jobs_[0]();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
  }

 private:
  void loop(std::size_t index) {
    uint64_t seen = 0;
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || round_ != seen; });
        if (stop_) return;
        seen = round_;
        if (index + 1 >= jobs_.size()) continue;
        job = jobs_[index + 1];
      }
      job();
      {
        std::lock_guard lock(mutex_);
        --pending_;
      }
      done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  std::vector<std::function<void()>> jobs_;
  std::size_t pending_ = 0;
  uint64_t round_ = 0;
  bool stop_ = false;
};

PipelineLeader::PipelineLeader(std::shared_ptr<ProcessGroup> group, int micro_batches)
    : group_(std::move(group)), micro_batches_(0) {
  set_micro_batches(micro_batches);
}

void PipelineLeader::set_micro_batches(int micro_batches) {
  if (micro_batches < 0 || micro_batches > kMaxMicroBatches)
    throw Error("--micro-batches " + std::to_string(micro_batches) + " is outside 0.." +
                    std::to_string(kMaxMicroBatches),
                "pipeline", "0 picks one micro-batch per rank");
  micro_batches_ = micro_batches;
}

int PipelineLeader::micro_batches_for(std::size_t rows) const noexcept {
  const int want = micro_batches_ > 0 ? micro_batches_ : group_->size();
  return static_cast<int>(std::clamp<std::size_t>(rows, 1, static_cast<std::size_t>(want)));
}

PipelineLeader::~PipelineLeader() {
  try {
    end();
  } catch (const std::exception& e) {
    log_warning("pipeline: could not tell the other ranks to end: {}", e.what());
  }
}

void PipelineLeader::command(int64_t op, int64_t a, int64_t b, int64_t c) {
  const Command cmd{kMagic, op, a, b, c};
  for (int r = 1; r < group_->size(); ++r) group_->send(bytes(cmd), r, kCommandTag);
}

int64_t PipelineLeader::started(std::span<const int64_t> prompt_ids, DType kv_dtype, int64_t reserve_tokens) {
  const int64_t id = next_id_++;
  command(kStart, id, static_cast<int64_t>(kv_dtype), reserve_tokens);
  const Tensor prompt = Tensor::from_vector(std::vector<int64_t>(prompt_ids.begin(), prompt_ids.end()),
                                            {static_cast<int64_t>(prompt_ids.size())}, DType::I64);
  for (int r = 1; r < group_->size(); ++r) group_->send_tensor(prompt, r, kCommandTag);
  return id;
}

void PipelineLeader::send_forward(const Tensor& input_ids, std::span<const int64_t> ids,
                                  std::span<const int64_t> tokens, int64_t logits_to_keep, int slot) {
  command(kForward, static_cast<int64_t>(ids.size()), logits_to_keep, slot);
  std::vector<int64_t> rows;
  for (std::size_t i = 0; i < ids.size(); ++i) rows.insert(rows.end(), {ids[i], tokens[i]});
  const Tensor table = Tensor::from_vector(rows, {static_cast<int64_t>(ids.size()), 2}, DType::I64);
  const Tensor host_ids = input_ids.device().is_host_addressable() ? input_ids : input_ids.to(Device::cpu());
  for (int r = 1; r < group_->size(); ++r) {  // delivered while this rank computes
    group_->send_tensor_async(table, r, kCommandTag);
    group_->send_tensor_async(host_ids.clone(), r, kCommandTag);
  }
}

Tensor PipelineLeader::forward(const Tensor& input_ids, std::span<const StepRow> rows, std::span<const int64_t> ids,
                               int64_t logits_to_keep, const LocalStep& step) {
  const auto t0 = Clock::now();
  std::vector<int64_t> tokens;
  for (const StepRow& r : rows) tokens.push_back(r.tokens);
  const int parts = micro_batches_for(rows.size());
  const std::vector<std::size_t> cut = split_rows(tokens, parts);
  const Tensor host_ids = input_ids.device().is_host_addressable() ? input_ids : input_ids.to(Device::cpu());
  std::vector<Tensor> logits(static_cast<std::size_t>(parts));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(parts));
  std::vector<int64_t> tickets;  // taken in order: micro-batch m's first turn comes after m - 1's
  for (int m = 0; m < parts; ++m) tickets.push_back(turns_.take());
  std::vector<std::function<void()>> jobs;
  int64_t first_token = 0;
  for (int m = 0; m < parts; ++m) {
    const std::size_t a = cut[static_cast<std::size_t>(m)], b = cut[static_cast<std::size_t>(m) + 1];
    int64_t n = 0;
    for (std::size_t i = a; i < b; ++i) n += tokens[i];
    const Tensor part_ids = parts == 1 ? host_ids : host_ids.slice(first_token, first_token + n);
    first_token += n;
    jobs.push_back([&, m, a, b, part_ids] {
      turns_.wait(tickets[static_cast<std::size_t>(m)]);
      try {
        MicroBatchScope scope(m, &turns_);
        send_forward(part_ids, ids.subspan(a, b - a), std::span<const int64_t>(tokens).subspan(a, b - a),
                     logits_to_keep, m);
        Tensor out = step(part_ids, rows.subspan(a, b - a), logits_to_keep);
        logits[static_cast<std::size_t>(m)] = out.device().is_host_addressable() ? out : out.to(Device::cpu());
      } catch (...) {
        errors[static_cast<std::size_t>(m)] = std::current_exception();
      }
      turns_.release();
    });
  }
  if (parts == 1) {
    jobs[0]();
  } else {
    if (!workers_) workers_ = std::make_unique<Workers>();
    workers_->run(std::move(jobs));
    most_micro_batches_ = std::max(most_micro_batches_, parts);
  }
  ++forwards_;
  forward_seconds_ += seconds_since(t0);
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  if (parts == 1) return logits[0];
  int64_t total_rows = 0;
  for (const Tensor& l : logits) total_rows += l.size(0);
  const int64_t vocab = logits[0].size(1);
  Tensor all = Tensor::empty({total_rows, vocab}, DType::F32);
  int64_t row = 0;
  for (const Tensor& l : logits) {
    all.slice(row, row + l.size(0)).copy_from(l);
    row += l.size(0);
  }
  return all;
}

PipelineTimes PipelineLeader::times() {
  PipelineTimes t;
  t.ranks = group_->size();
  t.micro_batches = most_micro_batches_;
  t.forwards = forwards_;
  t.forward_seconds = forward_seconds_;
  t.busy_seconds.push_back(turns_.busy_seconds());
  if (ended_) return t;
  command(kTimes);
  for (int r = 1; r < group_->size(); ++r) {
    std::array<double, 1> busy{};
    group_->recv(std::as_writable_bytes(std::span(busy)), r, kCommandTag);
    t.busy_seconds.push_back(busy[0]);
  }
  return t;
}

void PipelineLeader::cropped(int64_t id, int64_t length) { command(kCrop, id, length); }

void PipelineLeader::dropped(int64_t id) noexcept {
  if (ended_) return;
  try {
    command(kDrop, id);
  } catch (const std::exception& e) {
    log_warning("pipeline: could not tell the other ranks that sequence {} ended: {}", id, e.what());
  }
}

void PipelineLeader::end() {
  if (ended_) return;
  ended_ = true;
  command(kEnd);
  group_->flush();
}

void follow_pipeline(LanguageModel& model) {
  const std::shared_ptr<ProcessGroup>& group = model.pipeline_group();
  if (!group || group->rank() == 0)
    throw Error("follow_pipeline runs on the ranks other than 0 of a pipeline", model.type_name(),
                "load the model with a device map over ranks under mpirun");
  std::unordered_map<int64_t, std::shared_ptr<SequenceState>> states;
  auto state = [&](int64_t id) -> std::shared_ptr<SequenceState>& {
    auto it = states.find(id);
    if (it == states.end())
      throw Error("rank 0 named sequence " + std::to_string(id) + ", which this rank does not hold", "pipeline",
                  "every rank must run the same ferry version");
    return it->second;
  };
  double busy = 0;  // seconds computing in forwards
  for (;;) {
    Command cmd{};
    group->recv(bytes(cmd), 0, kCommandTag, std::chrono::milliseconds(0));  // idle as long as rank 0 is
    switch (op_of(cmd)) {
      case kStart: {
        const Start s = decode_start(cmd, group->recv_tensor(0, kCommandTag));
        states[s.id] = model.start_sequence(s.prompt, s.kv_dtype, s.reserve_tokens).state;
        break;
      }
      case kForward: {
        const Tensor table = group->recv_tensor(0, kCommandTag);
        const Tensor input_ids = group->recv_tensor(0, kCommandTag);
        const Forward f = decode_forward(cmd, table, input_ids, kMaxMicroBatches);
        std::vector<StepRow> rows;
        for (std::size_t i = 0; i < f.ids.size(); ++i) rows.push_back({state(f.ids[i]), f.tokens[i]});
        // Busy: the forward's time less what it waited for activations.
        const auto t0 = Clock::now();
        const double waited = pipeline_traffic().wait_seconds;
        MicroBatchScope scope(f.micro_batch, nullptr);
        (void)model.forward_step(input_ids, rows, f.logits_to_keep);
        busy += seconds_since(t0) - (pipeline_traffic().wait_seconds - waited);
        break;
      }
      case kTimes: {
        const std::array<double, 1> answer{busy};
        group->send(std::as_bytes(std::span(answer)), 0, kCommandTag);
        break;
      }
      case kCrop: state(cmd[2])->crop(decode_crop_length(cmd)); break;
      case kDrop: states.erase(cmd[2]); break;
      case kEnd: group->flush(); return;
    }
  }
}

void end_pipeline(LanguageModel& model) {
  if (model.pipeline_leader()) model.pipeline_leader()->end();
}

}  // namespace ferry::models
