// The tokenizer object ferry's Python API hands out (tokenizer.cc binds it; models.cc loads one with each model):
// the tokenizer.json tokenizer and, when the folder has one, its chat template.
#pragma once

#include <filesystem>
#include <memory>

#include "ferry/text/chat_template.h"
#include "ferry/text/tokenizer.h"

namespace ferry::python {

struct TokenizerObject {
  text::Tokenizer tokenizer;
  std::shared_ptr<const text::ChatTemplate> chat_template;  // null when the folder has none
};

/// The tokenizer of a model folder (tokenizer.json, plus chat_template.jinja or tokenizer_config.json's template),
/// a tokenizer.json file, or a GGUF file. Throws ferry::Error ("tokenizer.json not found", ...) when there is none.
TokenizerObject load_tokenizer(const std::filesystem::path& path);

}  // namespace ferry::python
