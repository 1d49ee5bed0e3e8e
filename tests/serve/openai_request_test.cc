// The OpenAI request parser of ferry serve: valid bodies become the settings they say; every malformed one is a 400
// naming the field (never an exception of another type, never a silently ignored parameter).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve/openai_request.h"

namespace {

using ferry::serve::ApiError;
using ferry::serve::Endpoint;
using ferry::serve::parse_completion_request;

TEST(OpenAiRequest, ChatWithEverySupportedSetting) {
  const auto r = parse_completion_request(R"({
    "model": "m", "messages": [{"role": "system", "content": "be brief"},
                               {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
    "max_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": 3, "min_p": 0.1, "repetition_penalty": 1.2,
    "seed": 42, "stop": ["x", "yz"], "stream": true, "stream_options": {"include_usage": true},
    "user": "u", "n": 1, "presence_penalty": 0, "frequency_penalty": 0.0, "tool_choice": "auto",
    "prompt_lookup_num_tokens": 0, "num_assistant_tokens": 5})",
                                          Endpoint::ChatCompletions);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1]["content"], "a\nb");  // text parts joined
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.temperature, 0);
  EXPECT_EQ(r.top_p, 0.5);
  EXPECT_EQ(r.top_k, 3);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "yz"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.prompt_lookup_num_tokens, 0);
  EXPECT_EQ(r.num_assistant_tokens, 5);
}

TEST(OpenAiRequest, MessageKeyOrderIsKept) {
  const auto r = parse_completion_request(R"({"model": "m", "messages": [{"role": "user", "content": "hi", "b": 1, "a": 2}]})",
                                          Endpoint::ChatCompletions);
  EXPECT_EQ(r.messages[0].dump(), R"({"role":"user","content":"hi","b":1,"a":2})");
}

TEST(OpenAiRequest, CompletionPromptForms) {
  EXPECT_EQ(*parse_completion_request(R"({"model":"m","prompt":"hi"})", Endpoint::Completions).prompt, "hi");
  EXPECT_EQ(*parse_completion_request(R"({"model":"m","prompt":["hi"]})", Endpoint::Completions).prompt, "hi");
  EXPECT_EQ(*parse_completion_request(R"({"model":"m","prompt":[1,2,3]})", Endpoint::Completions).prompt_ids,
            (std::vector<ferry::text::TokenId>{1, 2, 3}));
  EXPECT_EQ(*parse_completion_request(R"({"model":"m","prompt":[[4,5]]})", Endpoint::Completions).prompt_ids,
            (std::vector<ferry::text::TokenId>{4, 5}));
  const auto r = parse_completion_request(R"({"model":"m","prompt":"x","logprobs":2,"max_tokens":3.0,"stop":"."})",
                                          Endpoint::Completions);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_EQ(r.max_tokens, 3);
  EXPECT_EQ(r.stop, std::vector<std::string>{"."});
  // Defaults: OpenAI's (temperature 1, top_p 1), top_k off.
  const auto d = parse_completion_request(R"({"model":"m","prompt":"x"})", Endpoint::Completions);
  EXPECT_EQ(d.temperature, 1.0);
  EXPECT_EQ(d.top_k, 0);
  EXPECT_FALSE(d.max_tokens.has_value());
  EXPECT_FALSE(d.stream);
}

TEST(OpenAiRequest, MaxCompletionTokensWins) {
  const auto r = parse_completion_request(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":5,"max_completion_tokens":9})",
      Endpoint::ChatCompletions);
  EXPECT_EQ(r.max_tokens, 9);
}

struct Bad {
  Endpoint endpoint;
  const char* body;
  const char* param;  // the field the error must name ("" = none)
};

TEST(OpenAiRequest, MalformedBodiesAre400sNamingTheField) {
  const auto C = Endpoint::ChatCompletions, P = Endpoint::Completions;
  const std::vector<Bad> table = {
      {C, "", ""},
      {C, "{", ""},
      {C, "[1,2]", ""},
      {C, "\"text\"", ""},
      {C, "null", ""},
      {C, R"({"messages":[{"role":"user","content":"x"}]})", "model"},
      {C, R"({"model":7,"messages":[{"role":"user","content":"x"}]})", "model"},
      {C, R"({"model":"m"})", "messages"},
      {C, R"({"model":"m","messages":[]})", "messages"},
      {C, R"({"model":"m","messages":"hi"})", "messages"},
      {C, R"({"model":"m","messages":[5]})", "messages[0]"},
      {C, R"({"model":"m","messages":[{"content":"x"}]})", "messages[0].role"},
      {C, R"({"model":"m","messages":[{"role":"wizard","content":"x"}]})", "messages[0].role"},
      {C, R"({"model":"m","messages":[{"role":"user"}]})", "messages[0].content"},
      {C, R"({"model":"m","messages":[{"role":"user","content":42}]})", "messages[0].content"},
      {C, R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})",
       "messages[0].content[0].type"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":0})", "max_tokens"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":"5"})", "max_tokens"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":2.5})", "max_tokens"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":3})", "temperature"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":"hot"})", "temperature"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_p":0})", "top_p"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_k":-1})", "top_k"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"n":2})", "n"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"presence_penalty":0.5})", "presence_penalty"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"logit_bias":{"1":5}})", "logit_bias"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d","e"]})", "stop"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"stop":[""]})", "stop"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"stop":7})", "stop"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream":"yes"})", "stream"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}})",
       "stream_options"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true,"stream":true})", "logprobs"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_logprobs":3})", "top_logprobs"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"frobnicate":1})", "frobnicate"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"prompt":"x"})", "prompt"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}})",
       "response_format"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"seed":"1"})", "seed"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"prompt_lookup_num_tokens":-1})",
       "prompt_lookup_num_tokens"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"prompt_lookup_num_tokens":"3"})",
       "prompt_lookup_num_tokens"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"num_assistant_tokens":65})",
       "num_assistant_tokens"},
      {P, R"({"model":"m","prompt":"x","num_assistant_tokens":1.5})", "num_assistant_tokens"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1e300})", "max_tokens"},
      {C, R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":18446744073709551615})",
       "max_tokens"},
      {P, R"({"model":"m"})", "prompt"},
      {P, R"({"model":"m","prompt":""})", "prompt"},
      {P, R"({"model":"m","prompt":[]})", "prompt"},
      {P, R"({"model":"m","prompt":["a","b"]})", "prompt"},
      {P, R"({"model":"m","prompt":[1,-2]})", "prompt"},
      {P, R"({"model":"m","prompt":[1,"a"]})", "prompt"},
      {P, R"({"model":"m","prompt":{"text":"x"}})", "prompt"},
      {P, R"({"model":"m","prompt":"x","echo":true})", "echo"},
      {P, R"({"model":"m","prompt":"x","logprobs":9})", "logprobs"},
      {P, R"({"model":"m","prompt":"x","messages":[]})", "messages"},
      {P, R"({"model":"m","prompt":"x","best_of":3})", "best_of"},
      {P, "{\"model\":\"m\",\"logit_bias\":\x8e\x8e\x8e}", ""},  // invalid UTF-8 quoted by the parser's message
  };
  for (const Bad& b : table) {
    try {
      parse_completion_request(b.body, b.endpoint);
      ADD_FAILURE() << "accepted: " << b.body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << b.body;
      EXPECT_EQ(e.param(), b.param) << b.body << " -> " << e.what();
      EXPECT_EQ(e.type(), "invalid_request_error");
      EXPECT_FALSE(std::string(e.what()).empty());
      const auto body = e.body();
      EXPECT_EQ(body["error"]["message"], e.what());
      EXPECT_NO_THROW((void)body.dump()) << b.body;  // valid UTF-8, even when the body was not
    }
  }
  EXPECT_GE(table.size(), 20u);
}

}  // namespace
