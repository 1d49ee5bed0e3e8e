// ChatTemplate: finding a model folder's template (tokenizer_config.json string or list form,
// chat_template.jinja winning as in transformers 5), its special tokens, malformed files, and apply()'s handling of
// messages as transformers prepares them (null keys dropped, reasoning aliased, key order kept, tools, extra
// variables).
#include "ferry/text/chat_template.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ferry/core/error.h"

namespace ferry::text {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

class ChatTemplateFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ferry_chat_template_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  fs::path dir_;
};

const char* kChatml =
    "{% for m in messages %}{{ bos_token }}<|{{ m.role }}|>{{ m.content }}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}";

TEST_F(ChatTemplateFolder, StringTemplateAndSpecialTokensFromTokenizerConfig) {
  ojson config = {{"bos_token", "<s>"},
                  {"eos_token", {{"__type", "AddedToken"}, {"content", "</s>"}, {"lstrip", false}}},
                  {"pad_token", nullptr},
                  {"chat_template", kChatml}};
  write("tokenizer_config.json", config.dump());
  const auto t = ChatTemplate::from_folder(dir_);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->source(), kChatml);
  EXPECT_EQ(t->special_tokens().dump(), R"({"bos_token":"<s>","eos_token":"</s>"})");
  EXPECT_EQ(t->apply(ojson::parse(R"([{"role": "user", "content": "hi"}])")), "<s><|user|>hi</s>\n<|assistant|>");
  ChatTemplateOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  EXPECT_EQ(t->apply(ojson::parse(R"([{"role": "user", "content": "hi"}])"), no_prompt), "<s><|user|>hi</s>\n");
}

TEST_F(ChatTemplateFolder, ListFormTakesTheDefaultTemplate) {
  ojson config = {{"chat_template",
                   ojson::array({{{"name", "tool_use"}, {"template", "TOOLS"}}, {{"name", "default"}, {"template", "DEFAULT"}}})}};
  write("tokenizer_config.json", config.dump());
  const auto t = ChatTemplate::from_folder(dir_);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->apply(ojson::parse(R"([{"role": "user", "content": "x"}])")), "DEFAULT");
}

TEST_F(ChatTemplateFolder, ListFormWithoutDefaultIsAnError) {
  write("tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "R"}]})");
  try {
    (void)ChatTemplate::from_folder(dir_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.where().find("tokenizer_config.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.problem()).find("rag"), std::string::npos) << e.what();
  }
  write("tokenizer_config.json", R"({"chat_template": [{"name": "default"}]})");
  EXPECT_THROW((void)ChatTemplate::from_folder(dir_), Error);
}

TEST_F(ChatTemplateFolder, JinjaFileWinsOverTheConfig) {
  write("tokenizer_config.json", R"({"chat_template": "FROM CONFIG", "bos_token": "<s>"})");
  write("chat_template.jinja", "FROM FILE {{ bos_token }}\n");
  const auto t = ChatTemplate::from_folder(dir_);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->apply(ojson::parse(R"([{"role": "user", "content": "x"}])")), "FROM FILE <s>");
}

TEST_F(ChatTemplateFolder, JinjaFileAloneIsEnough) {
  write("chat_template.jinja", "{{ messages[0].content }}");
  const auto t = ChatTemplate::from_folder(dir_);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->apply(ojson::parse(R"([{"role": "user", "content": "only"}])")), "only");
  EXPECT_TRUE(t->special_tokens().empty());
}

TEST_F(ChatTemplateFolder, NoTemplateIsNullopt) {
  EXPECT_FALSE(ChatTemplate::from_folder(dir_).has_value());
  write("tokenizer_config.json", R"({"bos_token": "<s>", "chat_template": null})");
  EXPECT_FALSE(ChatTemplate::from_folder(dir_).has_value());
}

TEST_F(ChatTemplateFolder, MalformedFilesNameTheFile) {
  auto fails_naming = [&](const std::string& file) {
    try {
      (void)ChatTemplate::from_folder(dir_);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    }
  };
  write("tokenizer_config.json", R"({"chat_template": "x", )");
  fails_naming("tokenizer_config.json");
  write("tokenizer_config.json", R"(["not", "an", "object"])");
  fails_naming("tokenizer_config.json");
  write("tokenizer_config.json", R"({"chat_template": 42})");
  fails_naming("tokenizer_config.json");
  write("tokenizer_config.json", R"({"chat_template": "x", "eos_token": 7})");
  fails_naming("tokenizer_config.json");
  write("tokenizer_config.json", R"({"chat_template": "{% if %}"})");
  fails_naming("tokenizer_config.json: chat_template:1:");
  write("tokenizer_config.json", R"({"chat_template": "ok"})");
  write("special_tokens_map.json", "{bad json");
  fails_naming("special_tokens_map.json");
  fs::remove(dir_ / "special_tokens_map.json");
  write("chat_template.jinja", "{% for %}");
  fails_naming("chat_template.jinja:1:");
}

TEST_F(ChatTemplateFolder, SpecialTokensMapFillsMissingTokens) {
  write("tokenizer_config.json", R"({"chat_template": "{{ bos_token }}|{{ eos_token }}", "bos_token": "<s>"})");
  write("special_tokens_map.json", R"({"bos_token": "<ignored>", "eos_token": {"content": "</s>"}})");
  const auto t = ChatTemplate::from_folder(dir_);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->apply(ojson::parse(R"([{"role": "user", "content": "x"}])")), "<s>|</s>");
}

TEST(ChatTemplate, MessagesArePreparedAsTransformersDoes) {
  // (trim_blocks eats the newline after each {% endif %}.)
  const ChatTemplate t(
      "{% for m in messages %}{{ m | tojson }}{% if m.content is none %}NONE{% endif %}\n{% endfor %}"
      "{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }}");
  const std::string out = t.apply(ojson::parse(
      R"([{"role": "user", "content": null, "z": 1, "a": 2},
          {"role": "assistant", "content": "x", "reasoning": "why"}])"));
  EXPECT_EQ(out,
            "{\"role\": \"user\", \"z\": 1, \"a\": 2}"
            "{\"thinking\": \"why\", \"role\": \"assistant\", \"content\": \"x\", \"reasoning\": \"why\", "
            "\"reasoning_content\": \"why\"}"
            "True True True");
}

TEST(ChatTemplate, ToolsExtraContextAndTokens) {
  const ChatTemplate t("{{ tools | tojson }} {{ bos_token }} {{ flag }} {{ strftime_now('%d %b %Y') }}",
                       nlohmann::json{{"bos_token", "<s>"}});
  ChatTemplateOptions options;
  options.tools = ojson::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"b": 1, "a": 2.0}}}])");
  options.extra_context = {{"flag", true}, {"bos_token", "<override>"}};
  std::tm now{};
  now.tm_year = 125;
  now.tm_mday = 2;
  options.now = now;
  EXPECT_EQ(t.apply(ojson::parse(R"([{"role": "user", "content": "x"}])"), options),
            R"([{"type": "function", "function": {"name": "f", "parameters": {"b": 1, "a": 2.0}}}] <override> True 02 Jan 2025)");
}

TEST(ChatTemplate, PlainJsonConvertsToTheOptions) {
  // Callers holding nlohmann::json (sorted keys) can assign it directly.
  const ChatTemplate t("{{ tools | length }} {{ k }}");
  ChatTemplateOptions options;
  options.tools = nlohmann::json::parse(R"([{"type": "function"}, {"type": "function"}])");
  options.extra_context = nlohmann::json{{"k", "v"}};
  EXPECT_EQ(t.apply(nlohmann::json::parse(R"([{"role": "user", "content": "x"}])"), options), "2 v");
}

TEST(ChatTemplate, BadMessagesAreErrors) {
  const ChatTemplate t("{{ messages | length }}");
  EXPECT_THROW((void)t.apply(ojson::parse("{}")), Error);
  EXPECT_THROW((void)t.apply(ojson::array()), Error);
  EXPECT_THROW((void)t.apply(ojson::parse(R"(["user: hi"])")), Error);
  ChatTemplateOptions bad;
  bad.extra_context = ojson::array();
  EXPECT_THROW((void)t.apply(ojson::parse(R"([{"role": "user", "content": "x"}])"), bad), Error);
  // A plain nlohmann::json works too (its keys are sorted already).
  EXPECT_EQ(t.apply(nlohmann::json::parse(R"([{"role": "user", "content": "x"}])")), "1");
}

TEST(ChatTemplate, RaiseExceptionBecomesAnError) {
  const ChatTemplate t(
      "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}ok",
      nlohmann::json::object(), "gemma");
  EXPECT_EQ(t.apply(ojson::parse(R"([{"role": "user", "content": "x"}])")), "ok");
  try {
    (void)t.apply(ojson::parse(R"([{"role": "system", "content": "x"}])"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.problem(), "System role not supported");
    EXPECT_EQ(e.where(), "gemma:1:41");
  }
}

}  // namespace
}  // namespace ferry::text
