// Chat templates: a model's Jinja template that turns a list of chat messages into the prompt text, rendered
// byte for byte as transformers' `tokenizer.apply_chat_template(messages, tokenize=False, ...)` renders it.
//
// ferry carries its own Jinja engine (src/text/jinja) that follows jinja2 as transformers configures it:
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loop-controls extension
// ({% break %}, {% continue %}), transformers' {% generation %} tag (renders its body), its tojson filter
// (json.dumps with ensure_ascii=False: key order kept, ", " and ": " separators, Python float repr) and its globals
// raise_exception(msg) and strftime_now(fmt). Python's semantics are kept where a template can see them: str() of
// values (True, None, 1.0, ['a', 1], {'k': 'v'}), code-point string slicing, undefined variables rendering as
// "" and failing when an attribute of them is taken. Not supported (a ferry::Error when a template uses them):
// extends/block/include/import/from/with/autoescape/do tags, recursive loops and loop.changed, *args/**kwargs in
// calls and macro varargs, printf-style `str % x` and the format filter, format specs in str.format, the filters
// truncate/wordwrap/groupby/slice/striptags/urlencode/xmlattr/pprint/filesizeformat/random, the
// lipsum/cycler/joiner globals; integers are 64-bit (overflow is an error where Python would grow the integer);
// escape/safe return plain strings (no Markup auto-escaping of later concatenations). An unknown filter or test
// fails when it is reached (jinja2 refuses some of those when compiling).
//
// Key order: JSON objects keep the order they are given in (transformers keeps a Python dict's order), so pass
// messages, tools and extra context as nlohmann::ordered_json — parse HTTP bodies with
// nlohmann::ordered_json::parse — to render keys in the client's order. A plain nlohmann::json is accepted too,
// but its objects are already sorted by key.
//
// Every render is bounded (16 MiB of output, a million loop iterations and calls, macro calls 100 deep, range() at most
// 100000 items as in jinja2's sandbox), so no template can hang or exhaust memory.
#pragma once

#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace ferry::text {

namespace jinja {
class Template;
}

/// The keyword arguments of transformers' apply_chat_template(..., tokenize=False).
struct ChatTemplateOptions {
  /// add_generation_prompt: end with the header that starts the assistant's reply.
  bool add_generation_prompt = true;
  /// tools: JSON schemas of the tools the model may call (a JSON array); null = absent (the template sees None).
  nlohmann::ordered_json tools;
  /// **kwargs: more template variables (e.g. {"enable_thinking": false, "date_string": "26 Jul 2024"}); they
  /// override special tokens of the same name. Must be a JSON object.
  nlohmann::ordered_json extra_context = nlohmann::ordered_json::object();
  /// The clock strftime_now() reads; nullopt = the local time now (Python's datetime.now()).
  std::optional<std::tm> now;
};

/// A parsed chat template with the special tokens it may print ({{ bos_token }}).
/// Transformers equivalent: tokenizer.chat_template + tokenizer.apply_chat_template.
class ChatTemplate {
 public:
  /// Parses `source` now; syntax errors throw ferry::Error with `name`:line:column and a hint.
  /// `special_tokens`: {"bos_token": "<s>", "eos_token": "</s>", ...} (string values, or {"content": ...} dicts as
  /// tokenizer_config.json writes them); each becomes a template variable, as transformers' special_tokens_map.
  explicit ChatTemplate(std::string source, nlohmann::json special_tokens = nlohmann::json::object(),
                        std::string name = "chat template");

  /// The template of a Hugging Face model folder: chat_template.jinja when present (it wins over the config, as
  /// in transformers 5), else tokenizer_config.json's "chat_template" (a string, or a list of {"name",
  /// "template"} entries of which "default" is used). Special tokens (bos, eos, unk, sep, pad, cls, mask) come
  /// from tokenizer_config.json, missing ones from special_tokens_map.json. std::nullopt when the folder has no
  /// template. Malformed files throw ferry::Error naming the file.
  static std::optional<ChatTemplate> from_folder(const std::filesystem::path& dir);

  /// Renders `messages` (a JSON array of {"role", "content", ...} objects, as in the OpenAI API / transformers).
  /// As transformers does first: keys whose value is null are dropped from each message, and a message with
  /// "reasoning_content", "thinking" or "reasoning" gets both "thinking" and "reasoning_content".
  /// The template's raise_exception(msg) throws ferry::Error whose problem() is msg; every other template failure
  /// is a ferry::Error naming the line:column. Transformers: apply_chat_template(messages, tools=...,
  /// add_generation_prompt=..., tokenize=False, **extra_context).
  std::string apply(const nlohmann::ordered_json& messages, const ChatTemplateOptions& options = {}) const;
  std::string apply(const nlohmann::json& messages, const ChatTemplateOptions& options = {}) const;

  const std::string& source() const { return source_; }
  /// The special tokens the template sees, as plain strings.
  const nlohmann::ordered_json& special_tokens() const { return special_tokens_; }

 private:
  std::string source_;
  nlohmann::ordered_json special_tokens_;
  std::shared_ptr<const jinja::Template> template_;
};

}  // namespace ferry::text
