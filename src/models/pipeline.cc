// Rank 0 leads a pipeline's sequence calls, the other ranks follow them (models/pipeline.h).
#include "ferry/models/pipeline.h"

#include <array>
#include <unordered_map>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"

namespace ferry::models {
namespace {

constexpr int kCommandTag = 7002;
constexpr int64_t kMagic = 0x66657272797031;  // "ferryp1": a command of this version of the protocol

enum Op : int64_t { kStart = 1, kForward = 2, kCrop = 3, kDrop = 4, kEnd = 5 };

using Command = std::array<int64_t, 5>;  // magic, op, a, b, c

std::span<const std::byte> bytes(const Command& c) { return std::as_bytes(std::span(c)); }
std::span<std::byte> bytes(Command& c) { return std::as_writable_bytes(std::span(c)); }

}  // namespace

PipelineLeader::PipelineLeader(std::shared_ptr<ProcessGroup> group) : group_(std::move(group)) {}

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

void PipelineLeader::forward(const Tensor& input_ids, std::span<const int64_t> ids, std::span<const int64_t> tokens,
                             int64_t logits_to_keep) {
  command(kForward, static_cast<int64_t>(ids.size()), logits_to_keep);
  std::vector<int64_t> rows;
  for (std::size_t i = 0; i < ids.size(); ++i) rows.insert(rows.end(), {ids[i], tokens[i]});
  const Tensor table = Tensor::from_vector(rows, {static_cast<int64_t>(ids.size()), 2}, DType::I64);
  const Tensor host_ids = input_ids.device().is_host_addressable() ? input_ids : input_ids.to(Device::cpu());
  for (int r = 1; r < group_->size(); ++r) {
    group_->send_tensor(table, r, kCommandTag);
    group_->send_tensor(host_ids, r, kCommandTag);
  }
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
  for (;;) {
    Command cmd{};
    group->recv(bytes(cmd), 0, kCommandTag, std::chrono::milliseconds(0));  // idle as long as rank 0 is
    if (cmd[0] != kMagic)
      throw Error("rank 0 sent something that is not a pipeline command", "pipeline",
                  "every rank must run the same ferry version");
    switch (cmd[1]) {
      case kStart: {
        const Tensor prompt = group->recv_tensor(0, kCommandTag);
        const auto ids = prompt.to_vector<int64_t>();
        states[cmd[2]] = model.start_sequence(ids, static_cast<DType>(cmd[3]), cmd[4]).state;
        break;
      }
      case kForward: {
        const Tensor table = group->recv_tensor(0, kCommandTag);
        const Tensor input_ids = group->recv_tensor(0, kCommandTag);
        const auto t = table.to_vector<int64_t>();
        std::vector<StepRow> rows;
        for (int64_t i = 0; i < cmd[2]; ++i) rows.push_back({state(t[2 * i]), t[2 * i + 1]});
        (void)model.forward_step(input_ids, rows, cmd[3]);
        break;
      }
      case kCrop: state(cmd[2])->crop(cmd[3]); break;
      case kDrop: states.erase(cmd[2]); break;
      case kEnd: return;
      default:
        throw Error("rank 0 sent an unknown pipeline command " + std::to_string(cmd[1]), "pipeline",
                    "every rank must run the same ferry version");
    }
  }
}

void end_pipeline(LanguageModel& model) {
  if (model.pipeline_leader()) model.pipeline_leader()->end();
}

}  // namespace ferry::models
