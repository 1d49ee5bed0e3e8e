// A decoder-only model split over the ranks of a process group (big_modeling/pipeline.h): rank 0 drives — it
// tokenizes, samples and prints, through the same LanguageModel calls as a one-process run — and every other rank
// follows, making the same calls on its own copy of the skeleton, which holds only its layers' weights and keys and
// values. Each call of the sequence interface (start_sequence, forward_step, SequenceState::crop, a state dropped)
// is sent to the followers before rank 0 makes it; activations then move between ranks inside the forward.
//
//   rank 0:  model = load_language_model(folder, {.device_map = map});   // a map over ranks leads the pipeline
//            generate(*model, ...);  end_pipeline(*model);
//   others:  model = load_language_model(folder, {.device_map = map});  follow_pipeline(*model);
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "ferry/big_modeling/pipeline.h"
#include "ferry/core/dtype.h"
#include "ferry/core/process_group.h"
#include "ferry/core/tensor.h"
#include "ferry/models/language_model.h"

namespace ferry::models {

/// Where a pipeline's time went (PipelineLeader::times()): per rank, the seconds it computed during rank 0's
/// forwards; bubble = the share of ranks × forward time nobody computed in — idle ranks waiting for activations,
/// including stages that take longer than others.
struct PipelineTimes {
  int ranks = 1;
  int micro_batches = 1;             // the most one forward was split into
  int64_t forwards = 0;              // rank 0's forward_step calls
  double forward_seconds = 0;        // their wall time, on rank 0
  std::vector<double> busy_seconds;  // per rank
  double bubble() const;
};

/// Rank 0's end: sends each sequence call to the other ranks, and runs a forward over several sequences as
/// micro-batches in flight (GPipe's schedule within one step): rank 0 computes its blocks for micro-batch m + 1 while
/// the next ranks compute m. Held by the model (LanguageModel::pipeline_leader()).
class PipelineLeader {
 public:
  /// `micro_batches`: how many a forward over several sequences is split into (at most one per sequence, at most
  /// kMaxMicroBatches); 0 picks the number of ranks.
  explicit PipelineLeader(std::shared_ptr<ProcessGroup> group, int micro_batches = 0);
  /// Ends the followers (end()) if nobody did.
  ~PipelineLeader();
  PipelineLeader(const PipelineLeader&) = delete;
  PipelineLeader& operator=(const PipelineLeader&) = delete;
  /// A new sequence: returns its id.
  int64_t started(std::span<const int64_t> prompt_ids, DType kv_dtype, int64_t reserve_tokens);
  /// This rank's part of a forward over some sequences (LanguageModel::forward_step's arguments; the pipeline
  /// hooks exchange activations inside it).
  using LocalStep = std::function<Tensor(const Tensor& input_ids, std::span<const StepRow> rows, int64_t keep)>;
  /// A forward over `rows` (sequence ids `ids` on every rank): split into micro-batches of consecutive rows, each
  /// sent to the followers and run by `step` here, in turns; returns the logits of all rows in row order, on the cpu.
  Tensor forward(const Tensor& input_ids, std::span<const StepRow> rows, std::span<const int64_t> ids,
                 int64_t logits_to_keep, const LocalStep& step);
  /// How many micro-batches a forward over `rows` sequences is split into.
  int micro_batches_for(std::size_t rows) const noexcept;
  void set_micro_batches(int micro_batches);
  /// Asks every rank for its busy time (the followers answer between forwards).
  PipelineTimes times();
  void cropped(int64_t id, int64_t length);
  /// The sequence is gone (its state destroyed): followers free theirs. Never throws.
  void dropped(int64_t id) noexcept;
  /// Followers return from follow_pipeline. Idempotent.
  void end();
  ProcessGroup& group() const noexcept { return *group_; }

 private:
  class Workers;
  void command(int64_t op, int64_t a = 0, int64_t b = 0, int64_t c = 0);
  void send_forward(const Tensor& input_ids, std::span<const int64_t> ids, std::span<const int64_t> tokens,
                    int64_t logits_to_keep, int slot);
  std::shared_ptr<ProcessGroup> group_;
  int micro_batches_;
  int most_micro_batches_ = 1;
  int64_t next_id_ = 0;
  int64_t forwards_ = 0;
  double forward_seconds_ = 0;
  bool ended_ = false;
  PipelineTurns turns_;
  std::unique_ptr<Workers> workers_;  // one thread per micro-batch after the first, started when first needed
};

/// Ranks other than 0: mirrors rank 0's calls on `model` until rank 0 calls end_pipeline (or its leader is
/// destroyed). Throws ferry::Error when rank 0 sends something that is not a pipeline command (another ferry
/// version) or a call fails here.
void follow_pipeline(LanguageModel& model);
/// Rank 0: tells the followers to return. A no-op for a model that leads no pipeline.
void end_pipeline(LanguageModel& model);

}  // namespace ferry::models
