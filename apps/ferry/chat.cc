// Chat prompts (chat.h).
#include "chat.h"

namespace ferry::cli {

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
