// The response objects of the OpenAI API that ferry serve writes: whole responses, streamed chunks (server-sent
// events ending with `data: [DONE]`), usage, logprobs and finish reasons.
//
// OpenAI: chat.completion, chat.completion.chunk, text_completion (the legacy API's object for both forms).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/text/stopping.h"
#include "ferry/text/tokenizer.h"
#include "serve/openai_request.h"

namespace ferry::serve {

/// What every object of one response shares.
struct ResponseHeader {
  std::string id;     // "chatcmpl-…" or "cmpl-…"
  int64_t created = 0;  // Unix seconds
  std::string model;
  Endpoint endpoint = Endpoint::ChatCompletions;
};

/// "chatcmpl-<n>" or "cmpl-<n>" with `serial` in hex.
std::string response_id(Endpoint endpoint, uint64_t serial);

/// "stop" (EOS or a stop string), "length" (max_tokens or the context), else null (cancelled, unfinished).
nlohmann::json finish_reason(text::StopReason reason);

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
};
nlohmann::json usage_json(const Usage& u);

/// A server-sent event: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& data);
/// The stream's last event: "data: [DONE]\n\n".
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

/// A streamed chunk carrying `text` (chat: delta.content; the first chunk of a chat stream also carries the role).
nlohmann::json text_chunk(const ResponseHeader& h, std::string_view text, bool first);
/// The chunk that ends a choice: an empty delta (chat) or empty text, and the finish reason.
nlohmann::json final_chunk(const ResponseHeader& h, text::StopReason reason);
/// The usage chunk of stream_options.include_usage: empty choices and the usage.
nlohmann::json usage_chunk(const ResponseHeader& h, const Usage& u);

/// Per-token log-probabilities for a whole (non-streamed) response, from the raw logits of each step:
/// chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}; completions: the legacy
/// {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
nlohmann::json logprobs_json(Endpoint endpoint, const text::Tokenizer* tokenizer, std::span<const text::TokenId> ids,
                             const std::vector<std::vector<float>>& step_logits, int64_t top);

/// The whole response of a non-streamed request.
nlohmann::json full_response(const ResponseHeader& h, const std::string& text, text::StopReason reason, const Usage& u,
                             const nlohmann::json& logprobs = nullptr);

}  // namespace ferry::serve
