// ferry's chat templates against the oracle, transformers' own rendering (jinja2).
//
// tests/reference/jinja_oracle.py renders every template of tests/data/chat_templates (real Hugging Face chat
// templates, see SOURCES.md there) for 28 cases — system + user, multi-turn, a conversation ending with the
// assistant, odd content (quotes, backslashes, newlines, tabs, unicode, empty strings), a wrong role order, tools,
// tool calls (arguments as an object and as a JSON string, content null as OpenAI clients send it), reasoning content, extra variables, list content — each with and without add_generation_prompt, with
// transformers' render_jinja_template. This test renders the same with ferry::text::ChatTemplate and requires the
// same bytes, or a ferry::Error where transformers raises. strftime_now() reads a fixed clock on both sides
// (2024-07-26 12:00:00). It skips, saying why, when no Python with transformers is available (python_oracle.h).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "ferry/core/error.h"
#include "ferry/text/chat_template.h"
#include "python_oracle.h"

namespace ferry::text {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

// Templates ferry knowingly renders differently, with the reason. Empty: every template of the corpus agrees.
const std::map<std::string, std::string> kKnownUnsupported = {};

std::string show(const std::string& s, std::size_t from) {
  std::string out;
  for (std::size_t i = from; i < s.size() && i < from + 80; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += "\\n";
    else if (c < 0x20) out += "?";
    else out.push_back(static_cast<char>(c));
  }
  return "\"" + out + "\"";
}

std::string first_difference(const std::string& want, const std::string& got) {
  std::size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const std::size_t from = i > 30 ? i - 30 : 0;
  return "first difference at byte " + std::to_string(i) + "\n    want " + show(want, from) + "\n    got  " +
         show(got, from);
}

class JinjaOracle : public testing::OracleSuite<JinjaOracle, ojson> {
 public:
  static constexpr const char* kScript = "jinja_oracle.py";
};

TEST_F(JinjaOracle, EveryTemplateRendersLikeTransformers) {
  const ojson& cases = oracle()["cases"];
  std::tm now{};
  now.tm_year = 2024 - 1900;
  now.tm_mon = 6;
  now.tm_mday = 26;
  now.tm_hour = 12;
  now.tm_wday = 5;  // a Friday
  now.tm_yday = 207;
  std::size_t renders = 0, agree = 0, templates_ok = 0, raised = 0;
  for (const ojson& t : oracle()["templates"]) {
    const std::string file = t["file"];
    const fs::path path = fs::path(FERRY_SOURCE_DIR) / "tests/data/chat_templates" / file;
    std::ifstream in(path, std::ios::binary);
    const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const bool known = kKnownUnsupported.count(file) > 0;
    std::optional<ChatTemplate> tpl;
    try {
      tpl.emplace(source, nlohmann::json(t["special_tokens"]), file);
    } catch (const Error& e) {
      if (t.contains("compile_error")) {
        ++templates_ok;
      } else if (!known) {
        ADD_FAILURE() << file << ": ferry cannot parse it: " << e.what();
      }
      continue;
    }
    if (t.contains("compile_error")) {
      if (!known) ADD_FAILURE() << file << ": jinja2 refuses it (" << t["compile_error"] << ") but ferry parses it";
      continue;
    }
    std::vector<std::string> failures;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const ojson& c = cases[i];
      const ojson& want = t["results"][i];
      ChatTemplateOptions options;
      options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
      if (c.contains("tools")) options.tools = c["tools"];
      if (c.contains("extra")) options.extra_context = c["extra"];
      options.now = now;
      ++renders;
      std::string got;
      try {
        got = tpl->apply(c["messages"], options);
      } catch (const Error& e) {
        if (want.contains("error")) {
          ++agree;
          ++raised;
        } else {
          failures.push_back("case " + std::to_string(i) + ": ferry throws " + e.what());
        }
        continue;
      }
      if (want.contains("error")) {
        failures.push_back("case " + std::to_string(i) + ": transformers raises (" + want["error"].get<std::string>() +
                           ") but ferry renders " + show(got, 0));
      } else if (got != want["output"].get<std::string>()) {
        failures.push_back("case " + std::to_string(i) + ": " + first_difference(want["output"], got));
      } else {
        ++agree;
      }
    }
    if (failures.empty()) {
      ++templates_ok;
      if (known) ADD_FAILURE() << file << " is listed as known-unsupported but now agrees: remove it from the list";
    } else if (!known) {
      std::string text;
      for (std::size_t k = 0; k < failures.size() && k < 3; ++k) text += "\n  " + failures[k];
      ADD_FAILURE() << file << ": " << failures.size() << " of " << cases.size() << " cases differ" << text;
    }
  }
  const std::size_t n = oracle()["templates"].size();
  std::cout << "[ oracle   ] chat templates: " << templates_ok << "/" << n << " templates agree, " << agree << "/"
            << renders << " renders (" << raised << " raise in both); transformers "
            << oracle()["transformers_version"].get<std::string>() << ", jinja2 "
            << oracle()["jinja2_version"].get<std::string>() << "\n";
  EXPECT_GE(n, 15u);
}

}  // namespace
}  // namespace ferry::text
