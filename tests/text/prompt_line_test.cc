// Prompt lines (`ferry generate -i`): text, JSON objects with per-prompt settings, and every malformed form as a
// per-line error rather than an exception.
#include "ferry/text/prompt_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/core/error.h"

namespace ferry::text {
namespace {

using ::testing::HasSubstr;

TEST(PromptLine, TextAndJsonLines) {
  PromptLine t = parse_prompt_line("the capital of France is", 3);
  EXPECT_EQ(t.line, 3);
  EXPECT_EQ(t.text, "the capital of France is");
  EXPECT_TRUE(t.error.empty());
  EXPECT_EQ(parse_prompt_line(" not {json", 1).text, " not {json");  // only a leading { means JSON

  PromptLine j = parse_prompt_line(R"({"prompt": "Once", "max_new_tokens": 5, "id": {"k": 1}, "seed": 9})", 1);
  EXPECT_EQ(j.text, "Once");
  EXPECT_EQ(j.id, nlohmann::json::parse(R"({"k": 1})"));
  EXPECT_EQ(j.settings, nlohmann::json::parse(R"({"max_new_tokens": 5, "seed": 9})"));
  PromptLine ids = parse_prompt_line(R"(  {"prompt_ids": [1, 450, 7483]})", 2);
  EXPECT_EQ(ids.ids, (std::vector<TokenId>{1, 450, 7483}));
  EXPECT_FALSE(ids.text);
}

TEST(PromptLine, MalformedLinesAreErrorsNamingTheLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty"},
      {"  \t\r", "empty"},
      {"{", "not a JSON object"},
      {"{\"prompt\": \"a\"", "not a JSON object"},
      {"{}", "exactly one of"},
      {R"({"prompt": "a", "prompt_ids": [1]})", "exactly one of"},
      {R"({"prompt": 5})", "must be a string"},
      {R"({"prompt_ids": "1,2"})", "array of integers"},
      {R"({"prompt_ids": [1, 2.5]})", "array of integers"},
      {R"({"prompt_ids": [99999999999]})", "out of range"},
  };
  for (const auto& [line, want] : cases) {
    PromptLine p = parse_prompt_line(line, 7);
    EXPECT_THAT(p.error, HasSubstr(want)) << line;
    EXPECT_THAT(p.error, HasSubstr("line 7")) << line;
    EXPECT_FALSE(p.text) << line;
    EXPECT_FALSE(p.ids) << line;
  }
}

TEST(PromptLine, SettingsApplyOrNameTheBadKey) {
  SamplingOptions s;
  StopCriteria stop;
  apply_generation_settings(nlohmann::json::parse(R"({"max_new_tokens": 7, "temperature": 0.5, "top_k": 3,
      "top_p": 0.9, "min_p": 0.1, "repetition_penalty": 1.2, "seed": 11, "stop": "\n"})"), s, stop);
  EXPECT_EQ(stop.max_new_tokens, 7u);
  EXPECT_TRUE(s.do_sample);
  EXPECT_FLOAT_EQ(s.temperature, 0.5f);
  EXPECT_EQ(s.top_k, 3u);
  EXPECT_FLOAT_EQ(s.top_p, 0.9f);
  EXPECT_FLOAT_EQ(s.min_p, 0.1f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.2f);
  EXPECT_EQ(s.seed, 11u);
  EXPECT_EQ(stop.stop_strings, std::vector<std::string>{"\n"});
  apply_generation_settings(nlohmann::json::parse(R"({"temperature": 0, "stop": ["a", "b"], "n_predict": 2})"), s, stop);
  EXPECT_FALSE(s.do_sample);
  EXPECT_EQ(stop.stop_strings, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(stop.max_new_tokens, 2u);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"bogus": 1})", "bogus: unknown setting"},
      {R"({"max_new_tokens": -1})", "max_new_tokens: must be a non-negative integer"},
      {R"({"max_new_tokens": 1.5})", "non-negative integer"},
      {R"({"temperature": "hot"})", "temperature: must be a number"},
      {R"({"seed": -3})", "seed: must be a non-negative integer"},
      {R"({"stop": [1]})", "stop: must be a string or a list of strings"},
      {R"({"top_k": null})", "top_k"},
  };
  for (const auto& [json, want] : bad) {
    try {
      apply_generation_settings(nlohmann::json::parse(json), s, stop);
      ADD_FAILURE() << "no error for " << json;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(want)) << json;
    }
  }
}

}  // namespace
}  // namespace ferry::text
