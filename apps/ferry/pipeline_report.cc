// ferry generate's pipeline report (pipeline_report.h).
#include "pipeline_report.h"

#include <fmt/format.h>

#include "ferry/big_modeling/pipeline.h"
#include "ferry/models/pipeline.h"

namespace ferry::cli {

std::string pipeline_line(models::LanguageModel& model, std::size_t tokens) {
  const auto& leader = model.pipeline_leader();
  if (!leader) return "";
  const models::PipelineTimes t = leader->times();
  const PipelineTraffic traffic = pipeline_traffic();
  std::string busy;
  for (std::size_t r = 0; r < t.busy_seconds.size(); ++r)
    busy += fmt::format("{}rank {} {:.0f} %", r == 0 ? "" : ", ", r,
                        t.forward_seconds > 0 ? 100 * t.busy_seconds[r] / t.forward_seconds : 0.0);
  std::string line = fmt::format("pipeline: {} ranks, up to {} micro-batch{} per forward, bubble {:.0f} % (busy: {})",
                                 t.ranks, t.micro_batches, t.micro_batches == 1 ? "" : "es", 100 * t.bubble(), busy);
  if (tokens > 0)
    line += fmt::format(", {} of activations per token",
                        format_bytes(static_cast<int64_t>((traffic.bytes_sent + traffic.bytes_received) / tokens)));
  return line;
}

nlohmann::json pipeline_json(models::LanguageModel& model) {
  const auto& leader = model.pipeline_leader();
  if (!leader) return nullptr;
  const models::PipelineTimes t = leader->times();
  const PipelineTraffic traffic = pipeline_traffic();
  return {{"ranks", t.ranks},
          {"rank0_bytes_sent", traffic.bytes_sent},
          {"rank0_bytes_received", traffic.bytes_received},
          {"micro_batches", t.micro_batches},
          {"forwards", t.forwards},
          {"forward_s", t.forward_seconds},
          {"busy_s", t.busy_seconds},
          {"bubble", t.bubble()}};
}

}  // namespace ferry::cli
