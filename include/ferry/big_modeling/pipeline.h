// A pipeline over the ranks of a process group: a device map whose devices name ranks ("rank1:cpu", "rank1:disk",
// "rank1:cuda:0"; core/device.h) splits a model between processes — on one machine or several, started by mpirun —
// each of which loads and runs only its part. Only activations move, at the boundaries between the map's entries.
//
// Every rank builds the same skeleton and runs the same forwards in the same order (rank 0 drives; the others follow
// its calls, models/pipeline_model.h); the hooks here make each module run on its own rank only:
//
//   RankShare share = rank_share(model, map, group->rank());   // what this rank loads (the rest is skipped)
//   ... load share.local, skipping share.remote; dispatch share.local ...
//   attach_pipeline_hooks(model, map, group);
//
// The decoder blocks may be on any rank; everything else stays with rank 0, which embeds the tokens and turns the last
// block's output into logits. Per block, in the order they run:
//   - on its rank it runs: the first block takes the embeddings' output from rank 0; a block sends its output to the
//     next block's rank (rank 0 after the last block) when that is another rank;
//   - elsewhere it does not run (ModelHook::replace_forward): on the rank that runs what comes next it stands for
//     the output received from the block's rank; on the others, for zeros shaped like its output, which keep the
//     model's shapes and control flow and are never used.
// Entries without parameters (rotary tables, buffers) run on every rank.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ferry/big_modeling/device_map.h"
#include "ferry/big_modeling/max_memory.h"
#include "ferry/core/process_group.h"
#include "ferry/nn/module.h"

namespace ferry {

/// Whether a device of `map` names a rank other than 0.
bool has_ranks(const DeviceMap& map);
/// The highest rank `map` names, plus one.
int ranks_named(const DeviceMap& map);

/// What one rank of a pipeline loads of a device map over ranks.
struct RankShare {
  /// Its own entries with the rank dropped, the entries without parameters (run everywhere), and — so that the map
  /// still covers the whole model — the other ranks' entries as disk, never read (remote).
  DeviceMap local;
  std::vector<std::string> remote;  // the other ranks' entries with parameters: loaded nowhere here
};
/// Throws ferry::Error for a map that names a rank outside 0..size-1 of `group_size`.
RankShare rank_share(const nn::Module& model, const DeviceMap& map, int rank, int group_size);

/// Throws ferry::Error when an entry of `map` other than `blocks` holds parameters and names a rank other than 0.
void check_pipeline_map(const nn::Module& model, const DeviceMap& map, std::span<const std::string> blocks);

/// Attaches the pipeline's hooks (appended to hooks already there, as dispatch_model's). `map`: the device map over
/// ranks, the same on every rank of `group`; `blocks`: the map's entries for the model's decoder blocks in the order
/// they run — the only entries that may name a rank other than 0 (the embeddings, the final norm and the head stay
/// with rank 0, which samples). Throws ferry::Error for another entry on another rank.
void attach_pipeline_hooks(nn::Module& model, const DeviceMap& map, std::span<const std::string> blocks,
                           std::shared_ptr<ProcessGroup> group);

/// The device map of a pipeline planned from budgets on several ranks ("rank0:cpu=8GiB,rank1:cpu=8GiB,rank1:disk",
/// MaxMemory keys with rank prefixes): the modules outside the decoder blocks (below `layers_prefix`, e.g.
/// "model.layers") go to rank 0's first device; the blocks fill the ranks in order, each rank's devices in
/// Accelerate's order (accelerators, cpu), a disk taking what is left — as infer_auto_device_map fills devices
/// (`balanced` false) — or (`balanced`) each rank takes a share of the blocks in proportion to its memory, as
/// get_balanced_memory spreads a model over GPUs. `dtype`: the dtype weights are loaded as (sizes).
/// Throws ferry::Error when rank 0 cannot hold the modules outside the blocks, or the blocks do not fit and no rank
/// lists a disk.
DeviceMap infer_device_map_over_ranks(const nn::Module& model, const std::string& layers_prefix,
                                      const MaxMemory& budgets, bool balanced, std::optional<DType> dtype);

/// Bytes of activations this process sent to and received from other ranks through the pipeline hooks so far, and
/// the seconds its threads spent blocked on them (a receive whose activations had not come, a send the other rank
/// had not taken yet).
struct PipelineTraffic {
  std::size_t bytes_sent = 0, bytes_received = 0;
  double wait_seconds = 0;
};
PipelineTraffic pipeline_traffic() noexcept;

/// The most micro-batches of one forward (each has its own message tag).
inline constexpr int kMaxMicroBatches = 64;

/// The micro-batches of one forward on rank 0 take turns: the model runs one of them at a time (its modules are not
/// reentrant), and one that waits for another rank's activations hands its turn to the next, so that rank 0 computes
/// micro-batch m + 1 while the other ranks compute m — GPipe's schedule within a step. Turns are served in the order
/// they were taken (a ticket queue); the time they were held is the rank's busy time.
class PipelineTurns {
 public:
  /// A place in the queue; wait(ticket) returns when it is served.
  int64_t take();
  void wait(int64_t ticket);
  /// Ends the turn being served; the next ticket is served.
  void release();
  /// Seconds turns were held, in all.
  double busy_seconds() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable served_;
  int64_t next_ = 0, serving_ = 0;
  std::chrono::steady_clock::time_point since_{};
  double busy_ = 0;
};

/// While alive on a thread: the pipeline hooks send and receive this thread's activations under micro-batch
/// `slot`'s tag (0 .. kMaxMicroBatches-1; a follower sets the slot rank 0 named), and — when `turns` is given and this
/// thread holds a turn of it — every wait for another rank gives the turn up and queues for it again afterwards.
class MicroBatchScope {
 public:
  MicroBatchScope(int slot, PipelineTurns* turns);
  ~MicroBatchScope();
  MicroBatchScope(const MicroBatchScope&) = delete;
  MicroBatchScope& operator=(const MicroBatchScope&) = delete;

 private:
  int previous_slot_;
  PipelineTurns* previous_turns_;
};

}  // namespace ferry
