// Building OpenAI response objects (openai_response.h).
#include "serve/openai_response.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

namespace ferry::serve {

using nlohmann::json;

std::string response_id(Endpoint endpoint, uint64_t serial) {
  return fmt::format("{}-{:016x}", endpoint == Endpoint::ChatCompletions ? "chatcmpl" : "cmpl", serial);
}

json finish_reason(text::StopReason reason) {
  switch (reason) {
    case text::StopReason::EosToken:
    case text::StopReason::StopString:
      return "stop";
    case text::StopReason::MaxNewTokens:
    case text::StopReason::MaxLength:
      return "length";
    default:
      return nullptr;
  }
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

std::string sse_event(const json& data) {
  // dump() escapes nothing that could end an event: JSON text has no raw newline.
  return "data: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

namespace {

json base(const ResponseHeader& h, bool chunk) {
  const bool chat = h.endpoint == Endpoint::ChatCompletions;
  return {{"id", h.id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"system_fingerprint", "ferry"}};
}

}  // namespace

json text_chunk(const ResponseHeader& h, std::string_view text, bool first) {
  json j = base(h, true);
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (h.endpoint == Endpoint::ChatCompletions) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    delta["content"] = std::string(text);
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = std::string(text);
  }
  j["choices"] = json::array({std::move(choice)});
  return j;
}

json final_chunk(const ResponseHeader& h, text::StopReason reason) {
  json j = base(h, true);
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason(reason)}};
  if (h.endpoint == Endpoint::ChatCompletions) choice["delta"] = json::object();
  else choice["text"] = "";
  j["choices"] = json::array({std::move(choice)});
  return j;
}

json usage_chunk(const ResponseHeader& h, const Usage& u) {
  json j = base(h, true);
  j["choices"] = json::array();
  j["usage"] = usage_json(u);
  return j;
}

json logprobs_json(Endpoint endpoint, const text::Tokenizer* tokenizer, std::span<const text::TokenId> ids,
                   const std::vector<std::vector<float>>& step_logits, int64_t top) {
  auto token_text = [&](text::TokenId id) {
    return tokenizer ? tokenizer->decode(std::vector<text::TokenId>{id}, false) : std::to_string(id);
  };
  json content = json::array();
  json tokens = json::array(), token_logprobs = json::array(), tops = json::array(), offsets = json::array();
  int64_t offset = 0;
  const std::size_t n = std::min(ids.size(), step_logits.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::vector<float>& row = step_logits[i];
    // log_softmax in double: logprob(t) = logit(t) - max - log(sum(exp(logit - max))).
    const float mx = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (float v : row) sum += std::exp(static_cast<double>(v) - mx);
    const double lse = mx + std::log(sum);
    auto lp = [&](std::size_t t) { return static_cast<double>(row[t]) - lse; };
    std::vector<std::size_t> order;
    if (top > 0) {
      order.resize(row.size());
      std::iota(order.begin(), order.end(), 0);
      const auto k = static_cast<std::size_t>(std::min<int64_t>(top, static_cast<int64_t>(row.size())));
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                        [&](std::size_t a, std::size_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      order.resize(k);
    }
    const auto id = static_cast<std::size_t>(ids[i]);
    const std::string tok = token_text(ids[i]);
    const double logprob = id < row.size() ? lp(id) : -INFINITY;
    if (endpoint == Endpoint::ChatCompletions) {
      auto bytes = [](const std::string& s) {
        json b = json::array();
        for (unsigned char c : s) b.push_back(static_cast<int>(c));
        return b;
      };
      json alts = json::array();
      for (std::size_t t : order) {
        const std::string s = token_text(static_cast<text::TokenId>(t));
        alts.push_back({{"token", s}, {"logprob", lp(t)}, {"bytes", bytes(s)}});
      }
      content.push_back({{"token", tok}, {"logprob", logprob}, {"bytes", bytes(tok)}, {"top_logprobs", alts}});
    } else {
      tokens.push_back(tok);
      token_logprobs.push_back(logprob);
      json alts = json::object();
      for (std::size_t t : order) alts[token_text(static_cast<text::TokenId>(t))] = lp(t);
      tops.push_back(alts);
      offsets.push_back(offset);
      offset += static_cast<int64_t>(tok.size());
    }
  }
  if (endpoint == Endpoint::ChatCompletions) return {{"content", content}};
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json full_response(const ResponseHeader& h, const std::string& text, text::StopReason reason, const Usage& u,
                   const json& logprobs) {
  json j = base(h, false);
  json choice = {{"index", 0}, {"logprobs", logprobs}, {"finish_reason", finish_reason(reason)}};
  if (h.endpoint == Endpoint::ChatCompletions) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  j["choices"] = json::array({std::move(choice)});
  j["usage"] = usage_json(u);
  return j;
}

}  // namespace ferry::serve
