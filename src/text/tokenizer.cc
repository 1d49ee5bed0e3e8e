// Tokenizer (see ferry/text/tokenizer.h): loads tokenizer.json and runs HF's encode pipeline
// (added tokens -> normalizer -> pre-tokenizer -> model -> post-processor) and decode pipeline
// (ids -> token strings -> decoder chain).
#include "ferry/text/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/core/thread_pool.h"
#include "text/added_vocabulary.h"
#include "text/bpe.h"
#include "text/decoder.h"
#include "text/json_view.h"
#include "text/normalizer.h"
#include "text/post_processor.h"
#include "text/pre_tokenizer.h"
#include "text/unigram.h"
#include "text/unicode.h"

namespace ferry::text {

struct Tokenizer::Impl {
  std::unique_ptr<detail::Normalizer> normalizer;
  std::unique_ptr<detail::PreTokenizer> pre_tokenizer;
  std::unique_ptr<detail::Model> model;
  std::unique_ptr<detail::PostProcessor> post_processor;
  std::unique_ptr<detail::Decoder> decoder;
  detail::AddedVocabulary added;
  std::size_t vocab_size = 0;
};

namespace {

std::unique_ptr<detail::Model> parse_model(const detail::JsonView& model) {
  model.expect_object();
  std::string type = "BPE";
  if (auto t = model.get("type")) {
    type = t->as_string();
  } else if (model.has("vocab") && model.at("vocab").raw().is_array()) {
    type = "Unigram";  // HF tries each model in turn for an untagged one; a list of [piece, score] is Unigram
  } else if (!model.has("merges")) {
    model.fail("model has no \"type\" and no \"merges\"", "ferry reads BPE and Unigram models");
  }
  if (type == "BPE") return detail::Bpe::parse(model);
  if (type == "Unigram") return detail::Unigram::parse(model);
  if (type == "WordPiece" || type == "WordLevel") {
    model.at("type").fail("the " + type + " model is not supported by ferry", "ferry supports BPE and Unigram models");
  }
  model.at("type").fail("unknown model type \"" + type + "\"");
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view json_text, std::string_view source) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(json_text.begin(), json_text.end());
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(std::string("not valid JSON: ") + e.what(), std::string(source), "is the file complete?");
  }
  const detail::JsonView root(json, std::string(source));
  root.expect_object();
  auto impl = std::make_shared<Impl>();
  if (auto v = root.get("version"); v && v->as_string() != "1.0") {
    v->fail("unknown tokenizer.json version \"" + v->as_string() + "\"", "ferry reads version 1.0");
  }
  for (const char* ignored : {"truncation", "padding"}) {
    if (root.has(ignored)) {
      log_warning("{}: \"{}\" is set; ferry ignores it (it shapes batches, not token ids)", source, ignored);
    }
  }
  if (auto n = root.get("normalizer")) impl->normalizer = detail::parse_normalizer(*n);
  if (auto p = root.get("pre_tokenizer")) impl->pre_tokenizer = detail::parse_pre_tokenizer(*p);
  impl->model = parse_model(root.at("model"));
  if (auto p = root.get("post_processor")) impl->post_processor = detail::parse_post_processor(*p);
  if (auto d = root.get("decoder")) impl->decoder = detail::parse_decoder(*d);
  impl->added.build(root.get("added_tokens"), *impl->model, impl->normalizer.get());

  std::int64_t max_id = impl->model->max_id();
  for (const AddedToken& t : impl->added.tokens()) max_id = std::max<std::int64_t>(max_id, t.id);
  impl->vocab_size = static_cast<std::size_t>(max_id + 1);
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;  // NotFound only when the path is not there (exists() clears ec then)
    const bool missing = !std::filesystem::exists(path, ec) && !ec;
    throw Error(missing ? ErrorKind::NotFound : ErrorKind::InvalidValue, "cannot open the file", path.string(),
                "check the path and permissions");
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error("cannot read the file", path.string());
  return from_json(buffer.str(), path.string());
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& im = *impl_;
  const std::string valid = detail::to_valid_utf8(text);
  std::vector<detail::Piece> pieces;
  im.added.extract_and_normalize(valid, im.normalizer.get(), pieces);
  if (im.pre_tokenizer) im.pre_tokenizer->pre_tokenize(pieces);
  std::vector<TokenId> ids;
  ids.reserve(valid.size() / 3 + 4);
  for (const detail::Piece& p : pieces) {
    if (p.token >= 0) ids.push_back(p.token);
    else im.model->tokenize(p.text, ids);
  }
  if (im.post_processor) im.post_processor->process(ids, add_special_tokens);
  return ids;
}

std::vector<std::vector<TokenId>> Tokenizer::encode_batch(std::span<const std::string_view> texts,
                                                          bool add_special_tokens) const {
  std::vector<std::vector<TokenId>> out(texts.size());
  parallel_for(0, static_cast<std::int64_t>(texts.size()), 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) out[static_cast<std::size_t>(i)] = encode(texts[static_cast<std::size_t>(i)], add_special_tokens);
  });
  return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
  const Impl& im = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const TokenId id : ids) {
    const std::string* token = im.added.decode_form(id);
    if (!token) token = im.model->id_to_token(id);
    if (!token) continue;  // unknown ids are skipped, as HF does
    if (skip_special_tokens && im.added.is_special(*token)) continue;
    tokens.push_back(*token);
  }
  if (!im.decoder) {  // HF joins raw tokens with spaces when there is no decoder
    std::string out;
    for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  im.decoder->decode_chain(tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = impl_->added.token_to_id(token)) return id;
  return impl_->model->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(TokenId id) const {
  if (const std::string* a = impl_->added.decode_form(id)) return *a;
  if (const std::string* t = impl_->model->id_to_token(id)) return *t;
  return std::nullopt;
}

std::size_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

bool Tokenizer::is_special(TokenId id) const {
  const AddedToken* a = impl_->added.by_id(id);
  return a && a->special;
}

std::vector<AddedToken> Tokenizer::added_tokens() const { return impl_->added.tokens(); }

}  // namespace ferry::text
