// Prompt lines and per-prompt settings (see include/ferry/text/prompt_line.h).
#include "ferry/text/prompt_line.h"

#include <algorithm>
#include <climits>

#include "ferry/core/error.h"

namespace ferry::text {

PromptLine parse_prompt_line(std::string_view line, int64_t number) {
  PromptLine p;
  p.line = number;
  const std::string where = "line " + std::to_string(number);
  const auto first = line.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) {
    p.error = where + ": the prompt is empty";
    return p;
  }
  if (line[first] != '{') {
    p.text = std::string(line);
    return p;
  }
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    p.error = where + ": not a JSON object (a line starting with { is read as JSON)";
    return p;
  }
  if (j.contains("id")) p.id = j["id"];
  const bool has_text = j.contains("prompt"), has_ids = j.contains("prompt_ids");
  if (has_text == has_ids) {
    p.error = where + ": give exactly one of \"prompt\" (text) and \"prompt_ids\" (token ids)";
    return p;
  }
  const nlohmann::json& prompt = has_text ? j["prompt"] : j["prompt_ids"];
  if (has_text && prompt.is_string()) {
    p.text = prompt.get<std::string>();
  } else if (has_ids && prompt.is_array() &&
             std::all_of(prompt.begin(), prompt.end(), [](const auto& v) { return v.is_number_integer(); })) {
    std::vector<TokenId> ids;
    for (const auto& v : prompt) {
      const auto x = v.template get<int64_t>();
      if (x < INT32_MIN || x > INT32_MAX) {
        p.error = where + ": token id " + std::to_string(x) + " is out of range";
        return p;
      }
      ids.push_back(static_cast<TokenId>(x));
    }
    p.ids = std::move(ids);
  } else {
    p.error = where + ": \"prompt\" must be a string and \"prompt_ids\" an array of integers";
    return p;
  }
  for (auto& [key, value] : j.items())
    if (key != "prompt" && key != "prompt_ids" && key != "id") p.settings[key] = value;
  return p;
}

namespace {

template <typename T>
T get_as(const nlohmann::json& v, const std::string& key) {
  try {
    return v.get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error("has the wrong type: " + v.dump(), key);
  }
}

std::size_t count(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number_integer() || get_as<int64_t>(v, key) < 0)
    throw Error("must be a non-negative integer, got " + v.dump(), key);
  return get_as<std::size_t>(v, key);
}

float number(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number()) throw Error("must be a number, got " + v.dump(), key);
  return get_as<float>(v, key);
}

}  // namespace

void apply_generation_settings(const nlohmann::json& settings, SamplingOptions& sampling, StopCriteria& stop) {
  if (!settings.is_object()) throw Error("settings must be a JSON object", "generation settings");
  for (auto& [key, v] : settings.items()) {
    if (key == "max_new_tokens" || key == "n_predict") {
      stop.max_new_tokens = count(v, key);
    } else if (key == "temperature") {
      const float t = number(v, key);
      sampling.do_sample = t > 0;
      if (t > 0) sampling.temperature = t;
    } else if (key == "top_k") {
      sampling.top_k = count(v, key);
    } else if (key == "top_p") {
      sampling.top_p = number(v, key);
    } else if (key == "min_p") {
      sampling.min_p = number(v, key);
    } else if (key == "repetition_penalty") {
      sampling.repetition_penalty = number(v, key);
    } else if (key == "seed") {
      if (!v.is_number_unsigned()) throw Error("must be a non-negative integer, got " + v.dump(), key);
      sampling.seed = get_as<std::uint64_t>(v, key);
    } else if (key == "stop") {
      if (v.is_string()) {
        stop.stop_strings = {v.get<std::string>()};
      } else if (v.is_array() && std::all_of(v.begin(), v.end(), [](const auto& s) { return s.is_string(); })) {
        stop.stop_strings = v.get<std::vector<std::string>>();
      } else {
        throw Error("must be a string or a list of strings, got " + v.dump(), key);
      }
    } else {
      throw Error("unknown setting", key,
                  "per-prompt settings: max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty, seed, "
                  "stop, id");
    }
  }
}

}  // namespace ferry::text
