// OpenAI response objects and /metrics text: the shapes clients parse, finish reasons, logprobs as log-softmax of
// the raw logits, server-sent event framing.
#include <gtest/gtest.h>

#include <cmath>

#include "serve/metrics.h"
#include "serve/openai_response.h"

namespace ferry::serve {
namespace {

using nlohmann::json;

TEST(OpenAiResponse, ChunksAndWholeResponsesHaveOpenAisShape) {
  const ResponseHeader chat{"chatcmpl-1", 123, "m", Endpoint::ChatCompletions};
  const json first = text_chunk(chat, "", true);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_EQ(text_chunk(chat, "hi", false)["choices"][0]["delta"], (json{{"content", "hi"}}));
  const json last = final_chunk(chat, text::StopReason::EosToken);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  const json usage = usage_chunk(chat, {5, 7});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 12);
  const json whole = full_response(chat, "text", text::StopReason::MaxNewTokens, {1, 2});
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "text");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "length");

  const ResponseHeader cmpl{"cmpl-1", 123, "m", Endpoint::Completions};
  EXPECT_EQ(text_chunk(cmpl, "x", true)["choices"][0]["text"], "x");
  EXPECT_EQ(full_response(cmpl, "x", text::StopReason::StopString, {1, 1})["object"], "text_completion");
  EXPECT_EQ(finish_reason(text::StopReason::Cancelled), nullptr);
  EXPECT_EQ(finish_reason(text::StopReason::MaxLength), "length");
  EXPECT_EQ(response_id(Endpoint::Completions, 255), "cmpl-00000000000000ff");
}

TEST(OpenAiResponse, ServerSentEventsAreOneLineEach) {
  const std::string e = sse_event(json{{"text", "a\nb"}});
  EXPECT_EQ(e, "data: {\"text\":\"a\\nb\"}\n\n");
  EXPECT_EQ(std::string(kSseDone), "data: [DONE]\n\n");
  // Invalid UTF-8 is replaced, never thrown.
  EXPECT_NO_THROW(sse_event(json{{"text", std::string("\xff\xfe")}}));
}

TEST(OpenAiResponse, LogprobsAreTheLogSoftmaxOfTheRawLogits) {
  const std::vector<std::vector<float>> logits = {{0.0f, 1.0f, 2.0f}, {5.0f, 5.0f, -1.0f}};
  const std::vector<text::TokenId> ids = {2, 1};
  const json chat = logprobs_json(Endpoint::ChatCompletions, nullptr, ids, logits, 2);
  const double lse0 = std::log(std::exp(0.0) + std::exp(1.0) + std::exp(2.0));
  EXPECT_NEAR(chat["content"][0]["logprob"].get<double>(), 2.0 - lse0, 1e-6);
  EXPECT_EQ(chat["content"][0]["token"], "2");  // no tokenizer: ids
  EXPECT_EQ(chat["content"][0]["top_logprobs"][0]["token"], "2");
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["token"], "1");
  // Ties rank the lower id first.
  EXPECT_EQ(chat["content"][1]["top_logprobs"][0]["token"], "0");
  EXPECT_NEAR(chat["content"][1]["logprob"].get<double>(), std::log(0.5) - std::log1p(std::exp(-6.0) / 2), 1e-6);
  const json legacy = logprobs_json(Endpoint::Completions, nullptr, ids, logits, 1);
  EXPECT_EQ(legacy["tokens"], (json{"2", "1"}));
  EXPECT_EQ(legacy["text_offset"], (json{0, 1}));
  EXPECT_EQ(legacy["top_logprobs"][0].size(), 1u);
}

TEST(ServeMetrics, PrometheusTextHasEveryMetricWithHelpAndType) {
  EngineStats e;
  e.steps = 10;
  e.step_rows = 35;
  e.generated_tokens = 35;
  e.waiting = 3;
  e.running = 4;
  HttpStats h;
  h.requests[{"/v1/completions", 200}] = 6;
  h.streamed_bytes_per_forward = 1000;
  h.disk_read_bytes = 7000;
  const std::string text = render_metrics(e, h);
  for (const char* line : {"ferry_http_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 6\n",
                           "ferry_queue_length 3\n", "ferry_running_sequences 4\n", "ferry_steps_total 10\n",
                           "ferry_streamed_bytes_total 10000\n", "ferry_streamed_bytes_per_token 285.7\n",
                           "ferry_disk_read_bytes_per_token 200.0\n", "# TYPE ferry_queue_length gauge\n",
                           "# TYPE ferry_generated_tokens_total counter\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
}

}  // namespace
}  // namespace ferry::serve
