// Chat prompts for the CLI and the server, from the model's chat template (text::load_chat_template finds it: the
// folder's tokenizer_config.json "chat_template" or chat_template.jinja, a GGUF file's tokenizer.chat_template, or a
// file given with --chat-template).
//
// transformers: tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False), then the text
// is tokenized without adding special tokens (the template writes BOS itself).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/text/chat_template.h"
#include "ferry/text/tokenizer.h"

namespace ferry::cli {

/// The prompt ids of a conversation: the template rendered with add_generation_prompt, tokenized without special
/// tokens (the template writes them).
std::vector<text::TokenId> chat_prompt_ids(const text::ChatTemplate& chat, const text::Tokenizer& tokenizer,
                                           const nlohmann::json& messages);

/// The message that says a model has no chat template and what to do.
std::string no_chat_template_message(const std::string& model);

}  // namespace ferry::cli
