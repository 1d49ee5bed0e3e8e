// The bodies of POST /v1/chat/completions and POST /v1/completions, parsed and checked.
//
// Strict where a silent difference would give a wrong answer: a parameter ferry cannot honour (n > 1, a non-zero
// presence penalty, logit_bias, echo, suffix, ...) or does not know is a 400 naming it, never ignored; fields that
// change nothing about the tokens (user, metadata, store, ...) are accepted. Types and ranges follow OpenAI's API
// reference; the extensions llama-server and vLLM accept (top_k, min_p, repetition_penalty) are accepted too, and
// speculative decoding's per-request settings under transformers' generate() names (prompt_lookup_num_tokens,
// num_assistant_tokens).
//
// OpenAI: the Chat Completions and (legacy) Completions request objects.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/text/tokenizer.h"
#include "serve/api_error.h"

namespace ferry::serve {

enum class Endpoint { ChatCompletions, Completions };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::ChatCompletions;
  std::string model;
  nlohmann::ordered_json messages;  // chat: the messages, key order kept (templates may print them)
  nlohmann::ordered_json tools;     // chat: "tools" (null when absent), passed to the chat template
  std::optional<std::string> prompt;                   // completions: a text prompt
  std::optional<std::vector<text::TokenId>> prompt_ids;  // completions: a prompt of token ids
  std::optional<int64_t> max_tokens;                  // absent: the rest of the context (chat) or 16 (completions)
  double temperature = 1.0;                            // 0 = greedy
  double top_p = 1.0;
  int64_t top_k = 0;                                   // extension; 0 = off
  double min_p = 0.0, repetition_penalty = 1.0;        // extensions
  std::optional<uint64_t> seed;
  // Extensions: speculative decoding for this request, over the server's --lookup / --draft-model settings.
  std::optional<int64_t> prompt_lookup_num_tokens;  // 0: no prompt lookup
  std::optional<int64_t> num_assistant_tokens;      // the draft's proposals per step at most; 0: no draft
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  bool logprobs = false;
  int64_t top_logprobs = 0;
};

/// Parses a request body for `endpoint`. Throws ApiError (400) naming the field for invalid JSON, a body that is
/// not an object, a missing or mistyped field, a value out of range, or an unsupported parameter.
CompletionRequest parse_completion_request(std::string_view body, Endpoint endpoint);

}  // namespace ferry::serve
