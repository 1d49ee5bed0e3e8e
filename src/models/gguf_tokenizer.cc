// A GGUF file's tokenizer metadata as a tokenizer.json document (see gguf_tokenizer_json in
// include/ferry/models/gguf_model.h), for the two vocabularies llama-family GGUF files carry:
//  - "gpt2": byte-level BPE; tokens and merges as stored, llama.cpp's pre-tokenizer regexes (tokenizer.ggml.pre);
//  - "llama": SentencePiece BPE (Llama 1/2, Mistral, TinyLlama). llama.cpp tokenizes it by repeatedly merging the
//    adjacent pair of symbols whose concatenation is a token with the highest score (starting from UTF-8
//    characters, spaces escaped as ▁, a ▁ prefixed to each text fragment when add_space_prefix), falling back to
//    <0xXX> byte tokens for symbols that are not tokens. As a BPE model that is: merges = every split of every
//    token into two tokens, ranked by the whole token's score (highest first); byte_fallback; normalizer
//    Prepend("▁") + Replace(" ", "▁"), applied to each fragment between special tokens; decoder the reverse.
//    transformers converts GGUF SentencePiece vocabularies the same way.
// Control tokens (type 3) and user-defined ones (type 4) become added tokens, matched whole in the text.
// gguf_tokenizer_metadata goes the other way for export_gguf (tokenizer.json -> tokenizer.ggml.*).
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fstream>

#include "ferry/core/error.h"
#include "ferry/io/gguf_writer.h"
#include "ferry/models/gguf_model.h"

namespace ferry::models {
namespace {

[[noreturn]] void unsupported(const io::GgufFile& f, const std::string& key, const std::string& problem,
                              const std::string& hint) {
  throw Error(problem, f.where() + ": " + key, hint);
}

// llama.cpp's token types (llama.h, enum llama_token_type).
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// llama.cpp's pre-tokenizer regexes (src/llama-vocab.cpp, llm_tokenizer_bpe), applied in order, each splitting the
// pieces the previous one made; the byte-level mapping follows.
std::optional<std::vector<std::string>> pre_tokenizer_regexes(const std::string& pre) {
  const std::string gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
  const std::string llama3 =
      R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  const std::string qwen2 =
      R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  if (pre == "default" || pre == "gpt2" || pre == "mpt" || pre == "olmo" || pre == "jais" || pre == "trillion")
    return std::vector<std::string>{gpt2};
  if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "codeshell" ||
      pre == "exaone" || pre == "minerva-7b")
    return std::vector<std::string>{R"(\p{N})", gpt2};
  if (pre == "llama-bpe" || pre == "llama3" || pre == "dbrx" || pre == "smaug-bpe") return std::vector<std::string>{llama3};
  if (pre == "qwen2" || pre == "stablelm2" || pre == "hunyuan") return std::vector<std::string>{qwen2};
  // BLOOM's split (its tokenizer.json's Oniguruma class [^(\s|[.,!?…。，、।۔،])] spelled flat: the same set).
  if (pre == "bloom" || pre == "poro-chat" || pre == "gpt3-finnish")
    return std::vector<std::string>{R"( ?[^(\s|.,!?…。，、।۔،)]+)"};
  return std::nullopt;
}

// The vocabulary arrays every GGUF tokenizer has, checked.
struct Vocab {
  const io::GgufValue* tokens = nullptr;
  const io::GgufValue* types = nullptr;  // may be absent
  std::size_t size = 0;

  const std::string& piece(std::size_t id) const { return tokens->value[id].get_ref<const std::string&>(); }
  int64_t type(std::size_t id) const { return types ? types->value[id].get<int64_t>() : kNormal; }
};

Vocab read_vocab(const io::GgufFile& f) {
  Vocab v;
  v.tokens = f.find("tokenizer.ggml.tokens");
  if (!v.tokens || v.tokens->type != io::GgufValueType::Array || v.tokens->element_type != io::GgufValueType::String)
    unsupported(f, "tokenizer.ggml.tokens", "missing or not an array of strings", "");
  v.size = v.tokens->value.size();
  v.types = f.find("tokenizer.ggml.token_type");
  if (v.types && (v.types->type != io::GgufValueType::Array || v.types->value.size() != v.size ||
                  !std::all_of(v.types->value.begin(), v.types->value.end(), [](const auto& t) { return t.is_number_integer(); })))
    unsupported(f, "tokenizer.ggml.token_type",
                "must be an array of " + std::to_string(v.size) + " integers, one per token", "");
  return v;
}

// Control and user-defined tokens, matched whole in the text (llama.cpp's special-token partition).
nlohmann::json added_tokens(const Vocab& v) {
  nlohmann::json added = nlohmann::json::array();
  for (std::size_t id = 0; id < v.size; ++id) {
    const int64_t type = v.type(id);
    if (type == kControl || type == kUserDefined)
      added.push_back({{"id", id}, {"content", v.piece(id)}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", type == kUserDefined}, {"special", type == kControl}});
  }
  return added;
}

// BOS/EOS around the text when the file says so (tokenizer.ggml.add_bos_token / add_eos_token; absent: the
// model's default, true for SentencePiece BOS as in llama.cpp).
nlohmann::json post_processor(const io::GgufFile& f, const Vocab& v, bool add_bos_default) {
  const bool add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(add_bos_default);
  const bool add_eos = f.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
  const auto bos = f.get_int("tokenizer.ggml.bos_token_id"), eos = f.get_int("tokenizer.ggml.eos_token_id");
  auto valid = [&](const std::optional<int64_t>& id, const char* key) {
    if (id && (*id < 0 || static_cast<std::size_t>(*id) >= v.size))
      unsupported(f, key, "token id " + std::to_string(*id) + " is outside the vocabulary of " + std::to_string(v.size),
                  "");
    return id.has_value();
  };
  const bool with_bos = add_bos && valid(bos, "tokenizer.ggml.bos_token_id");
  const bool with_eos = add_eos && valid(eos, "tokenizer.ggml.eos_token_id");
  if (!with_bos && !with_eos) return nullptr;
  nlohmann::json single = nlohmann::json::array(), special = nlohmann::json::object();
  auto add = [&](int64_t id) {
    const std::string& p = v.piece(static_cast<std::size_t>(id));
    single.push_back({{"SpecialToken", {{"id", p}, {"type_id", 0}}}});
    special[p] = {{"id", p}, {"ids", {id}}, {"tokens", {p}}};
  };
  if (with_bos) add(*bos);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (with_eos) add(*eos);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", single}, {"special_tokens", special}};
}

nlohmann::json gpt2_tokenizer(const io::GgufFile& f, const Vocab& v) {
  const std::string pre = f.get_string("tokenizer.ggml.pre").value_or("default");
  const auto regexes = pre_tokenizer_regexes(pre);
  if (!regexes)
    unsupported(f, "tokenizer.ggml.pre", "llama.cpp pre-tokenizer \"" + pre + "\" is not supported yet",
                "pass token ids with --prompt-ids");
  const io::GgufValue* merges = f.find("tokenizer.ggml.merges");
  if (!merges || merges->type != io::GgufValueType::Array || merges->element_type != io::GgufValueType::String)
    unsupported(f, "tokenizer.ggml.merges", "missing or not an array of strings", "");
  nlohmann::json vocab = nlohmann::json::object();
  for (std::size_t id = 0; id < v.size; ++id)
    if (!vocab.contains(v.piece(id))) vocab[v.piece(id)] = id;  // duplicates keep their first id, as llama.cpp's map
  nlohmann::json splits = nlohmann::json::array();
  for (const auto& r : *regexes)
    splits.push_back({{"type", "Split"}, {"pattern", {{"Regex", r}}}, {"behavior", "Isolated"}, {"invert", false}});
  splits.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}});
  nlohmann::json j;
  j["version"] = "1.0";
  j["added_tokens"] = added_tokens(v);
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", splits}};
  j["post_processor"] = post_processor(f, v, false);
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  j["model"] = {{"type", "BPE"},        {"dropout", nullptr}, {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},    {"byte_fallback", false}, {"ignore_merges", false},
                {"vocab", vocab},       {"merges", merges->value}};
  return j;
}

// Byte offsets of the UTF-8 character boundaries inside s (excluding 0 and s.size()).
std::vector<std::size_t> char_boundaries(const std::string& s) {
  std::vector<std::size_t> out;
  for (std::size_t i = 1; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(i);
  return out;
}

nlohmann::json sentencepiece_tokenizer(const io::GgufFile& f, const Vocab& v) {
  const io::GgufValue* scores = f.find("tokenizer.ggml.scores");
  if (!scores || scores->type != io::GgufValueType::Array || scores->value.size() != v.size ||
      !std::all_of(scores->value.begin(), scores->value.end(), [](const auto& s) { return s.is_number(); }))
    unsupported(f, "tokenizer.ggml.scores",
                "a SentencePiece vocabulary needs one score per token (" + std::to_string(v.size) + ")", "");
  std::map<std::string, std::size_t> ids;  // piece -> first id, as llama.cpp's token_to_id
  nlohmann::json vocab = nlohmann::json::object();
  for (std::size_t id = 0; id < v.size; ++id) {
    if (ids.emplace(v.piece(id), id).second) vocab[v.piece(id)] = id;
  }
  // Every split of a token into two tokens is a merge, ranked by the token's score (highest first; equal scores by
  // the token's id, then the split's ids, so the order is deterministic).
  struct Merge {
    double score;
    std::size_t id, left, right;
    std::size_t split;
  };
  std::vector<Merge> merges;
  for (std::size_t id = 0; id < v.size; ++id) {
    const std::string& piece = v.piece(id);
    if (ids.at(piece) != id) continue;
    for (std::size_t cut : char_boundaries(piece)) {
      const auto l = ids.find(piece.substr(0, cut)), r = ids.find(piece.substr(cut));
      if (l != ids.end() && r != ids.end())
        merges.push_back({scores->value[id].get<double>(), id, l->second, r->second, cut});
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.id != b.id) return a.id < b.id;
    return a.left != b.left ? a.left < b.left : a.right < b.right;
  });
  nlohmann::json merge_list = nlohmann::json::array();
  for (const Merge& m : merges) merge_list.push_back(nlohmann::json::array({v.piece(m.left), v.piece(m.right)}));

  std::optional<int64_t> unk = f.get_int("tokenizer.ggml.unknown_token_id");
  if (!unk)
    for (std::size_t id = 0; id < v.size && !unk; ++id)
      if (v.type(id) == kUnknown) unk = static_cast<int64_t>(id);
  if (unk && (*unk < 0 || static_cast<std::size_t>(*unk) >= v.size))
    unsupported(f, "tokenizer.ggml.unknown_token_id", "token id " + std::to_string(*unk) + " is outside the vocabulary",
                "");
  const bool space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);

  nlohmann::json normalizers = nlohmann::json::array();
  if (space_prefix) normalizers.push_back({{"type", "Prepend"}, {"prepend", "\u2581"}});
  normalizers.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}});
  nlohmann::json decoders = nlohmann::json::array(
      {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}}, {{"type", "ByteFallback"}},
       {{"type", "Fuse"}}});
  if (space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});

  nlohmann::json j;
  j["version"] = "1.0";
  j["added_tokens"] = added_tokens(v);
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", normalizers}};
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = post_processor(f, v, true);
  j["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", unk ? nlohmann::json(v.piece(static_cast<std::size_t>(*unk))) : nlohmann::json(nullptr)},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", merge_list}};
  return j;
}

// ---- tokenizer.json -> tokenizer.ggml.* (export) ----------------------------------------------------------------

// The Split regexes of Hugging Face tokenizer.json files for the pre-tokenizers llama.cpp names.
std::string hf_pre_tokenizer_name(const nlohmann::json& pre) {
  if (!pre.is_object()) return "";
  const std::string type = pre.value("type", "");
  if (type == "ByteLevel") return pre.value("use_regex", true) ? "gpt2" : "";
  if (type != "Sequence" || !pre.contains("pretokenizers")) return "";
  const auto& seq = pre["pretokenizers"];
  if (seq.size() == 2 && seq[0].value("type", "") == "Digits" && seq[0].value("individual_digits", false) &&
      seq[1].value("type", "") == "ByteLevel" && seq[1].value("use_regex", true))
    return "smollm";
  if (seq.size() == 2 && seq[0].value("type", "") == "Split" && seq[1].value("type", "") == "ByteLevel" &&
      seq[0].contains("pattern") && seq[0]["pattern"].contains("Regex")) {
    const std::string r = seq[0]["pattern"]["Regex"].get<std::string>();
    if (r.rfind("(?i:'s|'t|'re|'ve|'m|'ll|'d)", 0) == 0 || r.rfind("(?:'[sS]|'[tT]|'[rR][eE]", 0) == 0) {
      if (r.find(R"(\p{N}{1,3})") != std::string::npos) return "llama-bpe";
      if (r.find(R"(|\p{N}|)") != std::string::npos) return "qwen2";
    }
  }
  return "";
}

bool spm_like(const nlohmann::json& tok) {
  const auto& model = tok["model"];
  if (!model.value("byte_fallback", false)) return false;
  const std::string dump = tok.contains("normalizer") ? tok["normalizer"].dump() : "";
  const std::string pre = tok.contains("pre_tokenizer") ? tok["pre_tokenizer"].dump() : "";
  return dump.find("\u2581") != std::string::npos || dump.find("▁") != std::string::npos ||
         pre.find("Metaspace") != std::string::npos;
}

}  // namespace

GgufTokenizerMetadata gguf_tokenizer_metadata(const std::filesystem::path& folder, const ConfigJson& config) {
  GgufTokenizerMetadata out;
  const auto path = folder / "tokenizer.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    out.description = "none (no tokenizer.json): the file runs on token ids only";
    out.metadata.emplace_back("tokenizer.ggml.model", io::gguf_string("none"));
    return out;
  }
  std::ifstream in(path);
  nlohmann::json tok;
  try {
    tok = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error(std::string("not valid JSON: ") + e.what(), path.string(), "");
  }
  const nlohmann::json& model = tok.contains("model") ? tok["model"] : nlohmann::json::object();
  if (model.value("type", "") != "BPE" || !model.contains("vocab") || !model["vocab"].is_object()) {
    out.description = "none (a " + model.value("type", std::string("?")) +
                      " tokenizer: ferry writes BPE vocabularies only): the file runs on token ids only";
    out.metadata.emplace_back("tokenizer.ggml.model", io::gguf_string("none"));
    return out;
  }
  // Tokens by id: the model's vocabulary, the added tokens, and llama.cpp's [PAD<i>] up to the embedding's rows.
  const int64_t vocab_size = config.require_int("vocab_size");
  std::vector<std::string> tokens(static_cast<std::size_t>(vocab_size));
  std::vector<int32_t> types(tokens.size(), kUnused);
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= vocab_size)
      throw Error("token id " + std::to_string(id) + " of \"" + it.key() + "\" is outside vocab_size " +
                      std::to_string(vocab_size),
                  path.string(), "are config.json and tokenizer.json from one model?");
    tokens[static_cast<std::size_t>(id)] = it.key(), types[static_cast<std::size_t>(id)] = kNormal;
  }
  if (tok.contains("added_tokens"))
    for (const auto& a : tok["added_tokens"]) {
      const int64_t id = a.value("id", int64_t{-1});
      if (id < 0 || id >= vocab_size) continue;
      tokens[static_cast<std::size_t>(id)] = a.value("content", std::string());
      types[static_cast<std::size_t>(id)] = a.value("special", false) ? kControl : kUserDefined;
    }
  for (std::size_t id = 0; id < tokens.size(); ++id)
    if (tokens[id].empty()) tokens[id] = "[PAD" + std::to_string(id) + "]";

  const bool spm = spm_like(tok);
  const std::string pre = spm ? "" : hf_pre_tokenizer_name(tok.value("pre_tokenizer", nlohmann::json()));
  if (!spm && pre.empty()) {
    out.description = "none (a byte-level BPE whose pre-tokenizer llama.cpp does not name): the file runs on token "
                      "ids only";
    out.metadata.emplace_back("tokenizer.ggml.model", io::gguf_string("none"));
    return out;
  }
  // Merges as "a b" strings, whichever form tokenizer.json uses.
  std::vector<std::string> merges;
  for (const auto& m : model.value("merges", nlohmann::json::array()))
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());

  nlohmann::json token_list = nlohmann::json::array(), type_list = nlohmann::json::array();
  for (std::size_t id = 0; id < tokens.size(); ++id) token_list.push_back(tokens[id]), type_list.push_back(types[id]);
  if (spm) {
    // SentencePiece scores from merge ranks: the token a merge makes scores −rank (earlier merges win), so
    // llama.cpp's highest-score-first merging follows the merge list.
    std::map<std::string, std::size_t> ids;
    for (std::size_t id = 0; id < tokens.size(); ++id) ids.emplace(tokens[id], id);
    std::vector<double> scores(tokens.size(), 0.0);
    std::vector<bool> scored(tokens.size(), false);
    for (std::size_t r = 0; r < merges.size(); ++r) {
      const std::size_t sp = merges[r].find(' ');
      if (sp == std::string::npos) continue;
      const auto it = ids.find(merges[r].substr(0, sp) + merges[r].substr(sp + 1));
      if (it != ids.end() && !scored[it->second]) scores[it->second] = -static_cast<double>(r), scored[it->second] = true;
    }
    const std::string unk = model.value("unk_token", nlohmann::json()).is_string() ? model["unk_token"].get<std::string>() : "";
    nlohmann::json score_list = nlohmann::json::array();
    for (std::size_t id = 0; id < tokens.size(); ++id) {
      const std::string& t = tokens[id];
      if (types[id] == kNormal && t.size() == 6 && t.rfind("<0x", 0) == 0 && t.back() == '>') type_list[id] = kByte;
      if (!unk.empty() && t == unk) type_list[id] = kUnknown;
      // Tokens no merge makes (single characters, bytes, specials) are never merge results: below every merge.
      score_list.push_back(scored[id] ? scores[id] : -1e9);
    }
    const std::string norm = tok.contains("normalizer") ? tok["normalizer"].dump() : "";
    const std::string pre_dump = tok.contains("pre_tokenizer") ? tok["pre_tokenizer"].dump() : "";
    const bool space_prefix = norm.find("Prepend") != std::string::npos ||
                              (pre_dump.find("Metaspace") != std::string::npos &&
                               pre_dump.find(R"("never")") == std::string::npos);
    out.metadata.emplace_back("tokenizer.ggml.model", io::gguf_string("llama"));
    out.metadata.emplace_back("tokenizer.ggml.tokens", io::gguf_array(io::GgufValueType::String, token_list));
    out.metadata.emplace_back("tokenizer.ggml.scores", io::gguf_array(io::GgufValueType::F32, score_list));
    out.metadata.emplace_back("tokenizer.ggml.token_type", io::gguf_array(io::GgufValueType::I32, type_list));
    out.metadata.emplace_back("tokenizer.ggml.add_space_prefix", io::gguf_bool(space_prefix));
    if (!unk.empty() && ids.count(unk))
      out.metadata.emplace_back("tokenizer.ggml.unknown_token_id", io::gguf_u32(static_cast<uint32_t>(ids.at(unk))));
    out.description = "llama (SentencePiece BPE, scored by merge rank)";
  } else {
    out.metadata.emplace_back("tokenizer.ggml.model", io::gguf_string("gpt2"));
    out.metadata.emplace_back("tokenizer.ggml.pre", io::gguf_string(pre));
    out.metadata.emplace_back("tokenizer.ggml.tokens", io::gguf_array(io::GgufValueType::String, token_list));
    out.metadata.emplace_back("tokenizer.ggml.token_type", io::gguf_array(io::GgufValueType::I32, type_list));
    out.metadata.emplace_back("tokenizer.ggml.merges", io::gguf_array(io::GgufValueType::String, merges));
    out.description = "gpt2 (byte-level BPE, pre-tokenizer " + pre + ")";
  }
  // BOS/EOS: config.json's ids; BOS added when the post-processor puts a special token first.
  auto first_id = [&](const char* key) -> std::optional<int64_t> {
    const nlohmann::json& j = config.json();
    if (!j.contains(key) || j[key].is_null()) return std::nullopt;
    if (j[key].is_array()) return j[key].empty() ? std::nullopt : std::optional<int64_t>(j[key][0].get<int64_t>());
    return j[key].get<int64_t>();
  };
  if (auto bos = first_id("bos_token_id")) out.metadata.emplace_back("tokenizer.ggml.bos_token_id", io::gguf_u32(static_cast<uint32_t>(*bos)));
  if (auto eos = first_id("eos_token_id")) out.metadata.emplace_back("tokenizer.ggml.eos_token_id", io::gguf_u32(static_cast<uint32_t>(*eos)));
  const nlohmann::json post = tok.value("post_processor", nlohmann::json());
  const bool add_bos = post.is_object() && post.value("type", "") == "TemplateProcessing" && post.contains("single") &&
                       !post["single"].empty() && post["single"][0].contains("SpecialToken");
  out.metadata.emplace_back("tokenizer.ggml.add_bos_token", io::gguf_bool(add_bos));
  out.metadata.emplace_back("tokenizer.ggml.add_eos_token", io::gguf_bool(false));
  return out;
}

nlohmann::json gguf_tokenizer_json(const io::GgufFile& f) {
  const std::string model = f.require_string("tokenizer.ggml.model");
  if (model != "gpt2" && model != "llama")
    unsupported(f, "tokenizer.ggml.model", "GGUF tokenizer model \"" + model + "\" is not supported yet",
                "ferry reads \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece) GGUF tokenizers; pass token ids "
                "with --prompt-ids");
  const Vocab v = read_vocab(f);
  return model == "gpt2" ? gpt2_tokenizer(f, v) : sentencepiece_tokenizer(f, v);
}

}  // namespace ferry::models
