// What a pipeline over ranks did in a run (big_modeling/pipeline.h, models/pipeline.h): the activations rank 0
// exchanged and where the ranks' time went — for ferry generate's end-of-run lines and --json.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "ferry/models/language_model.h"

namespace ferry::cli {

/// "pipeline: 2 ranks, up to 4 micro-batches per forward, bubble 18 % (busy: rank 0 83 %, rank 1 81 %), 16 KiB of
/// activations per token". Empty for a model that leads no pipeline. Asks the other ranks for their times.
std::string pipeline_line(models::LanguageModel& model, std::size_t tokens);
/// The same as JSON (null for a model that leads no pipeline).
nlohmann::json pipeline_json(models::LanguageModel& model);

}  // namespace ferry::cli
