// libFuzzer target for ferry's Jinja engine (chat templates): the input is a template. Parsing must either succeed
// or throw ferry::Error; a parsed template is then rendered with a small fixed conversation (system, user,
// assistant with a tool call, tool), tools and special tokens, with and without add_generation_prompt, and must
// either return text or throw ferry::Error. Anything else — another exception, a crash, a leak, a hang — is a bug.
// The render limits (output size, loop iterations, call depth) keep every input fast.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "ferry/core/error.h"
#include "ferry/text/chat_template.h"

namespace {

const nlohmann::ordered_json& messages() {
  static const nlohmann::ordered_json m = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hi \u00e9 \"quoted\"\n"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "22", "name": "get_weather"},
    {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
  ])");
  return m;
}

const nlohmann::ordered_json& tools() {
  static const nlohmann::ordered_json t = nlohmann::ordered_json::parse(R"([{"type": "function", "function":
    {"name": "get_weather", "description": "Weather", "parameters": {"type": "object",
     "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  try {
    const ferry::text::ChatTemplate t(source, nlohmann::json{{"bos_token", "<s>"}, {"eos_token", "</s>"}}, "fuzz");
    for (const bool prompt : {true, false}) {
      ferry::text::ChatTemplateOptions options;
      options.add_generation_prompt = prompt;
      if (prompt) options.tools = tools();
      std::tm now{};
      now.tm_year = 124;
      options.now = now;
      try {
        (void)t.apply(messages(), options);
      } catch (const ferry::Error&) {
      }
    }
  } catch (const ferry::Error&) {
  }
  return 0;
}
