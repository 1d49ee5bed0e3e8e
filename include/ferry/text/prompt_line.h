// One line of a prompts file (`ferry generate -i PROMPTS`): plain text, or a JSON object with the prompt and
// per-prompt generation settings — transformers' GenerationConfig keys where they exist.
//
//   the capital of France is
//   {"prompt": "Once upon", "max_new_tokens": 32, "temperature": 0.7, "seed": 1, "stop": ["\n"], "id": "a"}
//   {"prompt_ids": [1, 450, 7483]}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/text/sampling.h"
#include "ferry/text/stopping.h"
#include "ferry/text/tokenizer.h"

namespace ferry::text {

struct PromptLine {
  int64_t line = 0;                              // 1-based line number
  std::optional<std::string> text;               // "prompt", or the whole line when it is not JSON
  std::optional<std::vector<TokenId>> ids;       // "prompt_ids"
  nlohmann::json settings = nlohmann::json::object();  // the object's other keys (see apply_generation_settings)
  nlohmann::json id;                             // "id", any JSON value, echoed with the result
  std::string error;                             // why the line cannot be used (then text and ids are empty)
};

/// Parses one line; never throws: a line that cannot be used (blank, bad JSON, not an object, both or neither of
/// "prompt" and "prompt_ids", wrong types) comes back with `error` set, naming the line.
PromptLine parse_prompt_line(std::string_view line, int64_t number);

/// Applies per-prompt settings to `sampling` and `stop`: max_new_tokens (or n_predict), temperature (0 = greedy),
/// top_k, top_p, min_p, repetition_penalty, seed, stop (a string or a list). Throws ferry::Error naming the key
/// for an unknown key, a wrong type or a negative count; ranges are checked where the options are used (Sampler).
void apply_generation_settings(const nlohmann::json& settings, SamplingOptions& sampling, StopCriteria& stop);

}  // namespace ferry::text
