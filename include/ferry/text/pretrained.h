// A model with everything generation needs beside it — tokenizer, chat template, the ids that end generation and
// the device map that ran — found the same way for the CLI, the Python package and the server, from a Hugging Face
// folder or a GGUF file.
//
//   text::Pretrained p = text::from_pretrained("TinyLlama-1.1B", {.device_map = std::string("auto")});
//   GenerateOptions o;
//   o.stop.eos_token_ids = p.eos_token_ids;
//   auto r = text::generate(*p.model, *p.tokenizer, "Hello", o);
//
// transformers: AutoModelFor*.from_pretrained + AutoTokenizer.from_pretrained + GenerationConfig, as
// pipeline("text-generation", model=folder, device_map=...) assembles them.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/models/auto_model.h"
#include "ferry/models/language_model.h"
#include "ferry/text/chat_template.h"
#include "ferry/text/tokenizer.h"

namespace ferry::text {

/// The tokenizer of a model folder (its tokenizer.json), of a tokenizer.json file, or of a GGUF file (its
/// tokenizer.ggml.* metadata). Throws ferry::Error (NotFound: "tokenizer.json not found") when there is none, or
/// naming what ferry cannot reproduce. HF: AutoTokenizer.from_pretrained
Tokenizer load_tokenizer(const std::filesystem::path& path);

/// The chat template of a model folder (chat_template.jinja, else tokenizer_config.json's, with its special tokens)
/// or of a GGUF file (tokenizer.chat_template, with the texts of its bos/eos/unk/pad ids); nullopt when it has none.
/// `override_file`: a Jinja file used instead of the model's template, keeping the model's special tokens.
/// `tokenizer`: the model's tokenizer when the caller has built it (a GGUF file's special-token texts come from it;
/// null: built here).
std::optional<ChatTemplate> load_chat_template(const std::filesystem::path& path,
                                               const std::filesystem::path& override_file = {},
                                               const Tokenizer* tokenizer = nullptr);

/// The ids that end generation: generation_config.json's eos_token_id, else config.json's (an int or a list); a
/// GGUF file's tokenizer.ggml.eos_token_id. Empty when none is named. HF: GenerationConfig.eos_token_id
std::vector<TokenId> load_eos_token_ids(const std::filesystem::path& path);

/// A loaded model and what generation needs beside it.
struct Pretrained {
  std::shared_ptr<models::LanguageModel> model;
  std::optional<Tokenizer> tokenizer;                  // none when the model has no tokenizer ferry can read
  std::string tokenizer_error;                         // why not, then
  std::shared_ptr<const ChatTemplate> chat_template;  // null when the model has none, or it does not parse:
  std::string chat_template_error;                     // why, then
  std::vector<TokenId> eos_token_ids;
  /// The device map that ran (model->hf_device_map()).
  DeviceMap device_map() const { return model->hf_device_map().value_or(DeviceMap{{"", Device::cpu()}}); }
};

/// Loads the model at `path` (models::load_language_model), then its tokenizer, chat template (override_file as
/// above) and EOS ids. A tokenizer or chat template ferry cannot read is not an error here (token ids and plain
/// prompts still work): the member is empty and its *_error says why, for the call that needs it to raise.
Pretrained from_pretrained(const std::filesystem::path& path, const models::FromPretrainedOptions& options = {},
                           const std::filesystem::path& chat_template_override = {});

}  // namespace ferry::text
