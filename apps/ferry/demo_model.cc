// The demo model folder (see demo_model.h). Weights are uniform random with the variances that keep a deep
// stack lively (embeddings std 1, projections std 1/sqrt(fan_in), norm weights 1 ± 0.17): the text is
// meaningless, but every layer matters to the logits, so offloading mistakes would show.
#include "demo_model.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "ferry/core/convert.h"
#include "ferry/core/error.h"
#include "ferry/core/thread_pool.h"
#include "ferry/io/safetensors.h"
#include "ferry/models/config.h"
#include "ferry/nn/empty_weights.h"

namespace ferry::cli {
namespace {

nlohmann::json config_json(const DemoShape& s) {
  if (s.arch == "t5")
    return {{"architectures", {"T5ForConditionalGeneration"}},
            {"model_type", "t5"},
            {"d_model", s.hidden},
            {"d_ff", s.intermediate},
            {"d_kv", s.hidden / s.heads},
            {"num_layers", s.layers},
            {"num_decoder_layers", s.layers},
            {"num_heads", s.heads},
            {"vocab_size", s.vocab},
            {"feed_forward_proj", "gated-gelu"},
            {"tie_word_embeddings", false},
            {"pad_token_id", 0},
            {"eos_token_id", 1},
            {"decoder_start_token_id", 0},
            {"torch_dtype", "bfloat16"},
            {"_ferry_note", "random weights made by `ferry demo --arch t5`: the text it generates is meaningless"}};
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", s.hidden},
          {"intermediate_size", s.intermediate},
          {"num_hidden_layers", s.layers},
          {"num_attention_heads", s.heads},
          {"num_key_value_heads", s.kv_heads},
          {"vocab_size", s.vocab},
          {"max_position_embeddings", 2048},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"hidden_act", "silu"},
          {"tie_word_embeddings", false},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"torch_dtype", "bfloat16"},
          {"_ferry_note", "random weights made by `ferry demo`: the text it generates is meaningless"}};
}

// SentencePiece-style BPE (Llama 2's layout: <unk> <s> </s>, 256 byte-fallback tokens, then pieces built from
// a character set by merges), filled to exactly `vocab` entries so every id the model can produce decodes.
nlohmann::json tokenizer_json(int64_t vocab) {
  const std::string sp = "\xe2\x96\x81";  // ▁
  std::vector<std::string> base{sp};
  for (char c = 'a'; c <= 'z'; ++c) base.emplace_back(1, c);
  for (char c = 'A'; c <= 'Z'; ++c) base.emplace_back(1, c);
  for (char c = '0'; c <= '9'; ++c) base.emplace_back(1, c);
  for (char c : std::string(".,;:!?'\"-()")) base.emplace_back(1, c);
  nlohmann::json v = nlohmann::json::object();
  int64_t next = 0;
  auto add = [&](const std::string& piece) {
    if (next < vocab && !v.contains(piece)) v[piece] = next++;
  };
  add("<unk>");
  add("<s>");
  add("</s>");
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b));
  for (const auto& c : base) add(c);
  nlohmann::json merges = nlohmann::json::array();
  std::vector<std::string> pairs;
  for (const auto& a : base)
    for (const auto& b : base) {
      if (next >= vocab) break;
      if (v.contains(a + b)) continue;
      add(a + b);
      merges.push_back(a + " " + b);
      pairs.push_back(a + b);
    }
  for (const auto& ab : pairs)
    for (const auto& c : base) {
      if (next >= vocab) break;
      if (v.contains(ab + c)) continue;
      add(ab + c);
      merges.push_back(ab + " " + c);
    }
  auto special = [](int id, const char* content) {
    return nlohmann::json{{"id", id},        {"content", content}, {"single_word", false}, {"lstrip", false},
                          {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  nlohmann::json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = {special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")};
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "Prepend"}, {"prepend", sp}},
                       {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}}}}};
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"pair",
       {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
        {{"SpecialToken", {{"id", "<s>"}, {"type_id", 1}}}},
        {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Replace"}, {"pattern", {{"String", sp}}}, {"content", " "}},
                    {{"type", "ByteFallback"}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  j["model"] = {{"type", "BPE"},           {"dropout", nullptr},     {"unk_token", "<unk>"},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", true},
                {"byte_fallback", true},   {"ignore_merges", false}, {"vocab", v},
                {"merges", merges}};
  return j;
}

// T5's layout (<pad> </s> <unk>, then SentencePiece pieces with log-probability scores) as a Unigram
// tokenizer.json: Metaspace pre-tokenizer and decoder, </s> appended, filled to exactly `vocab` pieces.
nlohmann::json t5_tokenizer_json(int64_t vocab) {
  const std::string sp = "\xe2\x96\x81";  // ▁
  std::vector<std::string> chars;
  for (char c = 'a'; c <= 'z'; ++c) chars.emplace_back(1, c);
  for (char c = 'A'; c <= 'Z'; ++c) chars.emplace_back(1, c);
  for (char c = '0'; c <= '9'; ++c) chars.emplace_back(1, c);
  for (char c : std::string(".,;:!?'\"-()")) chars.emplace_back(1, c);
  nlohmann::json pieces = nlohmann::json::array();
  std::set<std::string> seen;
  double score = -2.0;
  auto add = [&](const std::string& piece, double s) {
    if (static_cast<int64_t>(pieces.size()) < vocab && seen.insert(piece).second) pieces.push_back({piece, s});
  };
  add("<pad>", 0.0);
  add("</s>", 0.0);
  add("<unk>", 0.0);
  add(sp, -2.0);
  for (const auto& c : chars) add(c, score -= 0.01), add(sp + c, score -= 0.01);
  for (const auto& a : chars)
    for (const auto& b : chars) add(sp + a + b, score -= 0.001), add(a + b, score -= 0.001);
  for (int64_t i = 0; static_cast<int64_t>(pieces.size()) < vocab; ++i) add(fmt::format("<extra_id_{}>", i), 0.0);
  auto special = [](int id, const char* content) {
    return nlohmann::json{{"id", id},        {"content", content}, {"single_word", false}, {"lstrip", false},
                          {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  const nlohmann::json metaspace = {{"type", "Metaspace"}, {"replacement", sp}, {"prepend_scheme", "always"},
                                    {"split", true}};
  nlohmann::json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = {special(0, "<pad>"), special(1, "</s>"), special(2, "<unk>")};
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = metaspace;
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
      {"pair",
       {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
        {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "B"}, {"type_id", 0}}}},
        {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"</s>", {{"id", "</s>"}, {"ids", {1}}, {"tokens", {"</s>"}}}}}}};
  j["decoder"] = metaspace;
  j["model"] = {{"type", "Unigram"}, {"unk_id", 2}, {"vocab", pieces}, {"byte_fallback", false}};
  return j;
}

// Fills a bf16 tensor with uniform values of the given mean and standard deviation; each chunk has its own
// seed, so the folder is the same on every machine and thread count.
void fill_uniform_bf16(Tensor& t, uint64_t seed, double mean, double stddev) {
  auto* p = t.data_as<uint16_t>();
  const int64_t n = t.numel();
  const float half_width = static_cast<float>(stddev * std::sqrt(3.0));
  const float m = static_cast<float>(mean);
  constexpr int64_t kChunk = 1 << 16;
  parallel_for(0, (n + kChunk - 1) / kChunk, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      uint64_t s = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(c) * 0xD1B54A32D192ED03ull);
      for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        const uint64_t r = s * 0x2545F4914F6CDD1Dull;
        const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
        p[i] = f32_to_bf16(m + (2 * u - 1) * half_width);
      }
    }
  });
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) throw Error("cannot write file", path.string(), "check free disk space and permissions");
}

}  // namespace

DemoShape demo_shape(const std::string& name, const std::string& arch) {
  if (arch == "t5") {
    if (name == "t5-base" || name == "tinyllama") return DemoShape{"t5", "t5-base", 768, 2048, 12, 12, 12, 32128};
    if (name == "tiny") return DemoShape{"t5", "t5-tiny", 128, 256, 3, 4, 4, 4096};
    throw Error("unknown T5 demo size '" + name + "'", "--size", "use t5-base (default) or tiny");
  }
  if (arch != "llama") throw Error("unknown demo architecture '" + arch + "'", "--arch", "use llama (default) or t5");
  if (name == "tinyllama") return DemoShape{};
  if (name == "tiny") return DemoShape{"llama", "tiny", 128, 352, 4, 4, 2, 2048};
  throw Error("unknown demo size '" + name + "'", "--size", "use tinyllama (default) or tiny");
}

std::filesystem::path ferry_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "ferry";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "ferry";
  return std::filesystem::temp_directory_path() / "ferry-cache";
}

std::filesystem::path ensure_demo_model(const DemoShape& shape, const std::filesystem::path& cache_dir) {
  const auto dir = cache_dir / ("demo-" + shape.name + "-bf16");
  if (std::filesystem::exists(dir / ".complete")) return dir;
  std::filesystem::create_directories(dir);
  const nlohmann::json config = config_json(shape);
  write_text(dir / "config.json", config.dump(2));
  const bool t5 = shape.arch == "t5";
  write_text(dir / "tokenizer.json", (t5 ? t5_tokenizer_json(shape.vocab) : tokenizer_json(shape.vocab)).dump());

  std::shared_ptr<nn::Module> skeleton;
  {
    auto guard = nn::init_empty_weights();
    const auto c = models::ConfigJson::from_json(config);
    if (t5) skeleton = models::AutoModelForSeq2SeqLM::from_config(c, DType::BF16);
    else skeleton = models::AutoModelForCausalLM::from_config(c, DType::BF16);
  }
  // Tied tensors (T5's shared = encoder/decoder embed_tokens) are written once, under their first name.
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : skeleton->state_dict()) {
    bool tied = false;
    for (const auto& [other, u] : tensors) tied = tied || u.is_same(t);
    if (!tied) tensors.emplace_back(name, t);
  }
  int64_t total = 0;
  for (const auto& [name, t] : tensors) total += static_cast<int64_t>(t.nbytes());
  const int64_t shard_limit = std::max<int64_t>(total / 3 + 1, 1 << 20);
  std::vector<std::vector<std::size_t>> shards(1);
  int64_t in_shard = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto bytes = static_cast<int64_t>(tensors[i].second.nbytes());
    if (in_shard > 0 && in_shard + bytes > shard_limit) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += bytes;
  }
  nlohmann::json weight_map = nlohmann::json::object();
  ProgressBar bar("creating the demo model");
  LoadProgress p;
  p.shard_count = shards.size();
  p.bytes_total = static_cast<std::size_t>(total);
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    io::StateDict sd;
    p.shard_index = s + 1;
    p.shard_name = file;
    p.tensors_in_shard = shards[s].size();
    p.tensors_done = 0;
    for (std::size_t i : shards[s]) {
      const auto& [name, meta] = tensors[i];
      Tensor t = Tensor::empty(meta.shape(), DType::BF16);
      const bool is_norm = name.find("norm") != std::string::npos;
      const bool is_embed = name.find("embed_tokens") != std::string::npos || name == "shared.weight";
      const double fan_in = static_cast<double>(meta.shape().back());
      fill_uniform_bf16(t, i, is_norm ? 1.0 : 0.0, is_norm ? 0.1 : is_embed ? 1.0 : 1.0 / std::sqrt(fan_in));
      sd.insert(name, t);
      weight_map[name] = file;
      p.bytes_done += t.nbytes();
      ++p.tensors_done;
      bar.update(p);
    }
    io::save_safetensors(sd, dir / file);
  }
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_text(dir / "model.safetensors.index.json", index.dump(2));
  write_text(dir / ".complete", "ferry demo model\n");
  bar.finish();
  return dir;
}

}  // namespace ferry::cli
