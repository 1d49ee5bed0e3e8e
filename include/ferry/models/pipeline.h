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
#include <memory>
#include <span>

#include "ferry/core/dtype.h"
#include "ferry/core/process_group.h"
#include "ferry/core/tensor.h"
#include "ferry/models/language_model.h"

namespace ferry::models {

/// Rank 0's end: sends each sequence call to the other ranks. Held by the model (LanguageModel::pipeline()).
class PipelineLeader {
 public:
  explicit PipelineLeader(std::shared_ptr<ProcessGroup> group);
  /// Ends the followers (end()) if nobody did.
  ~PipelineLeader();
  PipelineLeader(const PipelineLeader&) = delete;
  PipelineLeader& operator=(const PipelineLeader&) = delete;
  /// A new sequence: returns its id.
  int64_t started(std::span<const int64_t> prompt_ids, DType kv_dtype, int64_t reserve_tokens);
  /// A forward over sequences `ids` (their new token counts in `tokens`).
  void forward(const Tensor& input_ids, std::span<const int64_t> ids, std::span<const int64_t> tokens,
               int64_t logits_to_keep);
  void cropped(int64_t id, int64_t length);
  /// The sequence is gone (its state destroyed): followers free theirs. Never throws.
  void dropped(int64_t id) noexcept;
  /// Followers return from follow_pipeline. Idempotent.
  void end();
  ProcessGroup& group() const noexcept { return *group_; }

 private:
  void command(int64_t op, int64_t a = 0, int64_t b = 0, int64_t c = 0);
  std::shared_ptr<ProcessGroup> group_;
  int64_t next_id_ = 0;
  bool ended_ = false;
};

/// Ranks other than 0: mirrors rank 0's calls on `model` until rank 0 calls end_pipeline (or its leader is
/// destroyed). Throws ferry::Error when rank 0 sends something that is not a pipeline command (another ferry
/// version) or a call fails here.
void follow_pipeline(LanguageModel& model);
/// Rank 0: tells the followers to return. A no-op for a model that leads no pipeline.
void end_pipeline(LanguageModel& model);

}  // namespace ferry::models
