// StopChecker (see ferry/text/stopping.h).
#include "ferry/text/stopping.h"

#include <algorithm>
#include <optional>

#include "ferry/core/error.h"

namespace ferry::text {

const char* to_string(StopReason reason) {
  switch (reason) {
    case StopReason::None: return "none";
    case StopReason::EosToken: return "eos_token";
    case StopReason::StopString: return "stop_string";
    case StopReason::MaxNewTokens: return "max_new_tokens";
    case StopReason::MaxLength: return "max_length";
    case StopReason::Cancelled: return "cancelled";
  }
  return "unknown";
}

StopChecker::StopChecker(StopCriteria criteria) : criteria_(std::move(criteria)) {
  for (std::size_t i = 0; i < criteria_.stop_strings.size(); ++i) {
    if (criteria_.stop_strings[i].empty()) {
      throw Error("stop string " + std::to_string(i) + " is empty", "StopCriteria.stop_strings",
                  "an empty stop string would stop at once; remove it");
    }
  }
  if (criteria_.max_new_tokens == 0) reason_ = StopReason::MaxNewTokens;
}

std::string StopChecker::release_all() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

// Cuts the withheld text at its earliest stop string (a stop string may span several tokens, so the search includes
// what was held back): sets reason_ and matched_, returns the text before it and drops the rest. nullopt when no stop
// string occurs.
std::optional<std::string> StopChecker::cut_at_stop_string() {
  std::size_t cut = std::string::npos;
  for (const std::string& s : criteria_.stop_strings) {
    const std::size_t at = held_.find(s);
    if (at != std::string::npos && (cut == std::string::npos || at < cut)) {
      cut = at;
      matched_ = s;
    }
  }
  if (cut == std::string::npos) return std::nullopt;
  reason_ = StopReason::StopString;
  std::string before = held_.substr(0, cut);
  held_.clear();
  return before;
}

bool StopChecker::is_eos(TokenId id) const {
  return std::find(criteria_.eos_token_ids.begin(), criteria_.eos_token_ids.end(), id) != criteria_.eos_token_ids.end();
}

StopChecker::Step StopChecker::push(TokenId id, std::string_view new_text) {
  if (stopped()) {
    throw Error(std::string("generation already stopped (") + to_string(reason_) + ")", "StopChecker::push",
                "check stopped() before generating another token");
  }
  ++generated_;
  Step step;
  if (is_eos(id)) {
    reason_ = step.reason = StopReason::EosToken;
    step.text = release_all();
    return step;
  }
  held_.append(new_text);
  if (auto before = cut_at_stop_string()) {
    step.reason = reason_;
    step.text = std::move(*before);
    return step;
  }
  if (generated_ >= criteria_.max_new_tokens) {
    reason_ = step.reason = StopReason::MaxNewTokens;
    step.text = release_all();
    return step;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  std::size_t keep = 0;
  for (const std::string& s : criteria_.stop_strings) {
    for (std::size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  step.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return step;
}

StopChecker::Step StopChecker::finish(std::string_view tail) {
  Step step;
  step.reason = reason_;
  if (reason_ == StopReason::StopString) return step;  // the rest of the text followed the stop string
  held_.append(tail);
  std::optional<std::string> before = cut_at_stop_string();
  step.reason = reason_;
  step.text = before ? std::move(*before) : release_all();
  return step;
}

}  // namespace ferry::text
