// Finding a model's tokenizer, chat template and EOS ids, and loading all of it with the model (text/pretrained.h).
#include "ferry/text/pretrained.h"

#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ferry/core/error.h"
#include "ferry/io/gguf.h"
#include "ferry/models/gguf_model.h"

namespace ferry::text {
namespace fs = std::filesystem;
namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::NotFound, "cannot read the chat template file", path.string(), "check the path");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// bos_token / eos_token / unk_token / pad_token of a GGUF file: the texts of its tokenizer.ggml.*_token_id tokens
// (`tokenizer`: the file's, or null to build it here).
nlohmann::json gguf_special_tokens(const io::GgufFile& gguf, const fs::path& file, const Tokenizer* tokenizer) {
  nlohmann::json special = nlohmann::json::object();
  try {
    std::optional<Tokenizer> built;
    if (tokenizer == nullptr) tokenizer = &built.emplace(load_tokenizer(file));
    const Tokenizer& tok = *tokenizer;
    for (const auto& [key, name] : {std::pair{"tokenizer.ggml.bos_token_id", "bos_token"},
                                    std::pair{"tokenizer.ggml.eos_token_id", "eos_token"},
                                    std::pair{"tokenizer.ggml.unknown_token_id", "unk_token"},
                                    std::pair{"tokenizer.ggml.padding_token_id", "pad_token"}})
      if (auto id = gguf.get_int(key))
        if (auto t = tok.id_to_token(static_cast<TokenId>(*id))) special[name] = *t;
  } catch (const Error&) {
    // A tokenizer ferry cannot build: the template still renders, without the special tokens' texts.
  }
  return special;
}

void add_ids(const nlohmann::json& v, std::vector<TokenId>& out) {
  if (v.is_number_integer()) out.push_back(v.get<TokenId>());
  if (v.is_array())
    for (const auto& x : v)
      if (x.is_number_integer()) out.push_back(x.get<TokenId>());
}

// The "eos_token_id" of a JSON file; nothing when it is absent or does not parse (generation_config.json is
// advisory, and config.json was checked when the model loaded).
std::vector<TokenId> eos_ids_in(const fs::path& file) {
  std::vector<TokenId> out;
  if (!fs::exists(file)) return out;
  std::ifstream in(file);
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("eos_token_id")) add_ids(j["eos_token_id"], out);
  return out;
}

}  // namespace

Tokenizer load_tokenizer(const fs::path& path) {
  if (fs::is_directory(path)) {
    const fs::path file = path / "tokenizer.json";
    if (!fs::exists(file))
      throw Error(ErrorKind::NotFound, "tokenizer.json not found", path.string(),
                  "ferry reads a folder's tokenizer.json (the fast tokenizer; write one with "
                  "tokenizer.save_pretrained), or give token ids");
    return Tokenizer::from_file(file);
  }
  if (!fs::exists(path))
    throw Error(ErrorKind::NotFound, "tokenizer not found", path.string(),
                "pass a model folder, a tokenizer.json or a .gguf file");
  if (models::is_gguf_file(path))  // the tokenizer in the file's metadata, as a tokenizer.json document
    return Tokenizer::from_json(models::gguf_tokenizer_json(io::GgufFile::open(path)).dump(), path.string());
  return Tokenizer::from_file(path);
}

std::optional<ChatTemplate> load_chat_template(const fs::path& path, const fs::path& override_file,
                                               const Tokenizer* tokenizer) {
  if (models::is_gguf_file(path)) {
    const io::GgufFile gguf = io::GgufFile::open(path);
    nlohmann::json special = gguf_special_tokens(gguf, path, tokenizer);
    if (!override_file.empty()) return ChatTemplate(read_text(override_file), special);
    auto source = gguf.get_string("tokenizer.chat_template");
    if (!source) return std::nullopt;
    return ChatTemplate(*source, special);
  }
  std::optional<ChatTemplate> folder = fs::is_directory(path) ? ChatTemplate::from_folder(path) : std::nullopt;
  if (override_file.empty()) return folder;
  // The folder's special tokens with another template.
  const nlohmann::json special = folder ? nlohmann::json(folder->special_tokens()) : nlohmann::json::object();
  return ChatTemplate(read_text(override_file), special);
}

std::vector<TokenId> load_eos_token_ids(const fs::path& path) {
  if (models::is_gguf_file(path)) {  // llama.cpp's key for the end-of-sequence id
    std::vector<TokenId> out;
    if (auto id = io::GgufFile::open(path).get_int("tokenizer.ggml.eos_token_id"))
      out.push_back(static_cast<TokenId>(*id));
    return out;
  }
  std::vector<TokenId> out = eos_ids_in(path / "generation_config.json");
  if (out.empty()) out = eos_ids_in(path / "config.json");
  return out;
}

Pretrained from_pretrained(const fs::path& path, const models::FromPretrainedOptions& options,
                           const fs::path& chat_template_override) {
  Pretrained out;
  out.model = models::load_language_model(path, options);
  try {
    out.tokenizer = load_tokenizer(path);
  } catch (const Error& e) {
    out.tokenizer_error = e.what();
  }
  try {
    if (auto chat = load_chat_template(path, chat_template_override, out.tokenizer ? &*out.tokenizer : nullptr))
      out.chat_template = std::make_shared<const ChatTemplate>(std::move(*chat));
  } catch (const Error& e) {
    out.chat_template_error = e.what();
  }
  out.eos_token_ids = load_eos_token_ids(path);
  return out;
}

}  // namespace ferry::text
