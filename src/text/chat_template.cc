// ChatTemplate: finding a model folder's template and special tokens, and rendering messages the way
// transformers' apply_chat_template prepares and passes them.
#include "ferry/text/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ferry/core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/template.h"

namespace ferry::text {
namespace {

namespace fs = std::filesystem;

const char* const kSpecialTokenNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                          "pad_token", "cls_token", "mask_token"};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;  // NotFound only when the path is not there (exists() clears ec then)
    const bool missing = !fs::exists(path, ec) && !ec;
    throw Error(missing ? ErrorKind::NotFound : ErrorKind::InvalidValue, "cannot open the file", path.string(),
                "check its permissions");
  }
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw Error("cannot read the file", path.string());
  return s.str();
}

nlohmann::ordered_json read_json(const fs::path& path) {
  const std::string text = read_file(path);
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("malformed JSON: ") + e.what(), path.string(),
                "is the file complete? Download the model folder again");
  }
}

// A special token as transformers stores it: a string, or an AddedToken dict with "content"; nullopt for null.
std::optional<std::string> token_string(const nlohmann::ordered_json& v, const std::string& where) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  throw Error("a special token must be a string or an object with a string \"content\"", where,
              "check the folder's tokenizer_config.json");
}

nlohmann::ordered_json normalize_tokens(const nlohmann::ordered_json& given, const std::string& where) {
  if (!given.is_object()) throw Error("special tokens must be a JSON object", where);
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [k, v] : given.items()) {
    if (auto s = token_string(v, where + ": " + k)) out[k] = *s;
  }
  return out;
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, nlohmann::json special_tokens, std::string name)
    : source_(std::move(source)),
      special_tokens_(normalize_tokens(nlohmann::ordered_json(special_tokens), name)),
      template_(std::make_shared<const jinja::Template>(source_, std::move(name))) {}

std::optional<ChatTemplate> ChatTemplate::from_folder(const fs::path& dir) {
  const fs::path config_path = dir / "tokenizer_config.json";
  const fs::path jinja_path = dir / "chat_template.jinja";
  const fs::path map_path = dir / "special_tokens_map.json";
  std::error_code ec;
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  if (fs::exists(config_path, ec)) {
    config = read_json(config_path);
    if (!config.is_object()) throw Error("expected a JSON object", config_path.string());
  }
  std::optional<std::string> source;
  std::string name;
  if (fs::exists(jinja_path, ec)) {
    source = read_file(jinja_path);
    name = jinja_path.string();
  } else if (config.contains("chat_template") && !config["chat_template"].is_null()) {
    const auto& t = config["chat_template"];
    name = config_path.string() + ": chat_template";
    if (t.is_string()) {
      source = t.get<std::string>();
    } else if (t.is_array()) {
      std::vector<std::string> names;
      for (const auto& entry : t) {
        if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("template") ||
            !entry["template"].is_string()) {
          throw Error("each entry of the \"chat_template\" list must be {\"name\": string, \"template\": string}",
                      config_path.string());
        }
        names.push_back(entry["name"].get<std::string>());
        if (names.back() == "default") {
          source = entry["template"].get<std::string>();
          name = config_path.string() + ": chat_template[default]";
        }
      }
      if (!source) {
        throw Error("the \"chat_template\" list has no \"default\" entry (it has " + list_for_error(names) + ")",
                    config_path.string(), "transformers needs a template name in this case; so does ferry");
      }
    } else {
      throw Error("\"chat_template\" must be a string or a list of {\"name\", \"template\"}", config_path.string());
    }
  }
  if (!source) return std::nullopt;

  nlohmann::json tokens = nlohmann::json::object();
  for (const char* key : kSpecialTokenNames) {
    if (!config.contains(key)) continue;
    if (auto s = token_string(config[key], config_path.string() + ": " + key)) tokens[key] = *s;
  }
  if (fs::exists(map_path, ec)) {
    const nlohmann::ordered_json map = read_json(map_path);
    if (!map.is_object()) throw Error("expected a JSON object", map_path.string());
    for (const char* key : kSpecialTokenNames) {
      if (tokens.contains(key) || !map.contains(key)) continue;
      if (auto s = token_string(map[key], map_path.string() + ": " + key)) tokens[key] = *s;
    }
  }
  return ChatTemplate(std::move(*source), std::move(tokens), std::move(name));
}

std::string ChatTemplate::apply(const nlohmann::json& messages, const ChatTemplateOptions& options) const {
  return apply(nlohmann::ordered_json(messages), options);
}

std::string ChatTemplate::apply(const nlohmann::ordered_json& messages, const ChatTemplateOptions& options) const {
  using jinja::Value;
  const std::string& where = template_->name();
  if (!messages.is_array()) throw Error("messages must be a JSON array of message objects", where);
  if (messages.empty()) {
    throw Error("cannot apply a chat template to an empty conversation", where, "provide at least one message");
  }
  if (!options.extra_context.is_object()) throw Error("the extra template context must be a JSON object", where);
  // transformers: _normalize_chat_messages (drop null values), then _alias_reasoning_fields.
  nlohmann::ordered_json chat = nlohmann::ordered_json::array();
  for (const auto& m : messages) {
    if (!m.is_object()) throw Error("each message must be a JSON object, got " + std::string(m.type_name()), where);
    nlohmann::ordered_json msg = nlohmann::ordered_json::object();
    for (const auto& [k, v] : m.items()) {
      if (!v.is_null()) msg[k] = v;
    }
    for (const char* field : {"reasoning_content", "thinking", "reasoning"}) {
      if (!msg.contains(field)) continue;
      const nlohmann::ordered_json reasoning = msg[field];
      nlohmann::ordered_json aliased = nlohmann::ordered_json::object();
      aliased["thinking"] = reasoning;
      for (const auto& [k, v] : msg.items()) aliased[k] = v;
      aliased["reasoning_content"] = reasoning;
      msg = std::move(aliased);
      break;
    }
    chat.push_back(std::move(msg));
  }
  std::vector<std::pair<std::string, Value>> vars;
  vars.emplace_back("messages", jinja::from_json(chat));
  vars.emplace_back("tools", jinja::from_json(options.tools));
  vars.emplace_back("documents", Value::none());
  vars.emplace_back("add_generation_prompt", Value::boolean(options.add_generation_prompt));
  for (const auto& [k, v] : special_tokens_.items()) vars.emplace_back(k, jinja::from_json(v));
  for (const auto& [k, v] : options.extra_context.items()) vars.emplace_back(k, jinja::from_json(v));
  jinja::RenderSettings settings;
  settings.now = options.now;
  return template_->render(vars, settings);
}

}  // namespace ferry::text
