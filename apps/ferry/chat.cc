// Finding a model's chat template (chat.h).
#include "chat.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ferry/core/error.h"
#include "ferry/io/gguf.h"
#include "ferry/models/gguf_model.h"
#include "run_model.h"

namespace ferry::cli {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read the chat template file", path, "check the path given to --chat-template");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// bos_token / eos_token of a GGUF file: the texts of its tokenizer.ggml.bos/eos_token_id tokens.
nlohmann::json gguf_special_tokens(const std::string& file) {
  nlohmann::json special = nlohmann::json::object();
  const io::GgufFile gguf = io::GgufFile::open(file);
  try {
    const text::Tokenizer tok = load_tokenizer(file);
    for (const auto& [key, name] : {std::pair{"tokenizer.ggml.bos_token_id", "bos_token"},
                                    std::pair{"tokenizer.ggml.eos_token_id", "eos_token"},
                                    std::pair{"tokenizer.ggml.unknown_token_id", "unk_token"},
                                    std::pair{"tokenizer.ggml.padding_token_id", "pad_token"}})
      if (auto id = gguf.get_int(key))
        if (auto t = tok.id_to_token(static_cast<text::TokenId>(*id))) special[name] = *t;
  } catch (const Error&) {
    // A tokenizer ferry cannot build: the template still renders, without the special tokens' texts.
  }
  return special;
}

}  // namespace

std::optional<text::ChatTemplate> load_chat_template(const std::string& model, const std::string& override_file) {
  if (models::is_gguf_file(model)) {
    nlohmann::json special = gguf_special_tokens(model);
    if (!override_file.empty()) return text::ChatTemplate(read_text(override_file), special);
    auto source = io::GgufFile::open(model).get_string("tokenizer.chat_template");
    if (!source) return std::nullopt;
    return text::ChatTemplate(*source, special);
  }
  std::optional<text::ChatTemplate> folder = text::ChatTemplate::from_folder(model);
  if (override_file.empty()) return folder;
  // The folder's special tokens with another template.
  const nlohmann::json special = folder ? nlohmann::json(folder->special_tokens()) : nlohmann::json::object();
  return text::ChatTemplate(read_text(override_file), special);
}

std::vector<text::TokenId> chat_prompt_ids(const text::ChatTemplate& chat, const text::Tokenizer& tokenizer,
                                           const nlohmann::json& messages) {
  text::ChatTemplateOptions o;
  o.add_generation_prompt = true;
  return tokenizer.encode(chat.apply(messages, o), /*add_special_tokens=*/false);
}

std::string no_chat_template_message(const std::string& model) {
  return "the model has no chat template (" + model +
         ": no \"chat_template\" in tokenizer_config.json, no chat_template.jinja, no tokenizer.chat_template in a "
         "GGUF file); pass one with --chat-template FILE.jinja, or use a plain prompt (-p)";
}

}  // namespace ferry::cli
