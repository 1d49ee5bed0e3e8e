// GGUF files as models: random Hugging Face folders converted by llama.cpp's own convert_hf_to_gguf.py
// (tests/reference/gguf_convert.py) must load into the same modules and compute the same logits as the folder —
// bit-identical for f32 and f16 files, within the quantization error for q8_0 — for Llama (q/k rows un-permuted,
// GQA) and Qwen2 (biases, tied head). Skipped without the reference venv (scripts/venv).
#include "ferry/models/gguf_model.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ferry/models/auto_model.h"
#include "ferry/nn/init.h"
#include "ferry/nn/module_tensors.h"
#include "ferry/text/tokenizer.h"
#include "support/error_of.h"
#include "support/hf_folder.h"
#include "support/llama_cpp_oracle.h"

namespace ferry::models {
namespace {

namespace fs = std::filesystem;

Tensor prompt() { return Tensor::from_vector(std::vector<int64_t>{3, 14, 15, 92, 65, 35, 89, 7}, {8}); }

TEST(GgufNames, LlamaCppNamesMapToHuggingFaceNamesBothWays) {
  ASSERT_NE(find_gguf_architecture("llama"), nullptr);
  const GgufTensorNames& names = *find_gguf_architecture("llama")->tensors;
  auto hf = [&](std::string_view g) { return hf_tensor_name(names, g); };
  EXPECT_EQ(hf("token_embd.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(hf("output_norm.weight"), "model.norm.weight");
  EXPECT_EQ(hf("output.weight"), "lm_head.weight");
  EXPECT_EQ(hf("blk.12.attn_q.weight"), "model.layers.12.self_attn.q_proj.weight");
  EXPECT_EQ(hf("blk.0.attn_k.bias"), "model.layers.0.self_attn.k_proj.bias");
  EXPECT_EQ(hf("blk.3.attn_output.weight"), "model.layers.3.self_attn.o_proj.weight");
  EXPECT_EQ(hf("blk.3.ffn_norm.weight"), "model.layers.3.post_attention_layernorm.weight");
  EXPECT_EQ(hf("blk.3.ffn_down.weight"), "model.layers.3.mlp.down_proj.weight");
  EXPECT_EQ(hf("blk.3.attn_norm.weight"), "model.layers.3.input_layernorm.weight");
  // The same table read the other way (what `ferry quantize` writes).
  for (const char* g : {"token_embd.weight", "output_norm.weight", "output.weight", "blk.12.attn_q.weight",
                        "blk.0.attn_k.bias", "blk.3.ffn_gate.weight", "blk.3.ffn_up.weight"})
    EXPECT_EQ(gguf_tensor_name(names, *hf(g)), g);
  for (const char* bad : {"rope_freqs.weight", "blk.x.attn_q.weight", "blk.3.attn_q.scale", "blk..attn_q.weight",
                          "blk.3", "blk", "blk.3.attn_zz.weight", ""})
    EXPECT_EQ(hf(bad), std::nullopt) << bad;
  for (const char* bad : {"model.layers.x.mlp.up_proj.weight", "model.layers.3.mlp.up_proj", "model.layers",
                          "model.layersX.3.mlp.up_proj.weight", "model.embed_tokens.bias"})
    EXPECT_EQ(gguf_tensor_name(names, bad), std::nullopt) << bad;
  EXPECT_EQ(find_gguf_architecture("gpt2"), nullptr);  // not read by ferry
  EXPECT_FALSE(is_gguf_file(FERRY_SOURCE_DIR "/README.md"));
}

// A tokenizer.json whose vocabulary goes past config.json's vocab_size cannot be written: the error names the token.
TEST(GgufExport, AVocabularyBeyondVocabSizeNamesTheToken) {
  test::TempDir dir;
  std::ofstream(dir.path() / "tokenizer.json")
      << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "zebra": 7}, "merges": []}})";
  const ConfigJson config = ConfigJson::from_json({{"vocab_size", 4}});
  const std::string e = test::error_of([&] { gguf_tokenizer_metadata(dir.path(), config); });
  EXPECT_NE(e.find("token id 7 of \"zebra\" is outside vocab_size 4"), std::string::npos) << e;
}

// llama.cpp's converter and llama.cpp itself on folders ferry writes.
class GgufOracle : public test::LlamaCppOracleTest {};

TEST_F(GgufOracle, LlamaCppConvertedFilesComputeWhatTheFolderComputes) {
  nlohmann::json qwen2 = test::tiny_qwen2_config();
  qwen2["use_sliding_window"] = false;  // llama.cpp's qwen2 and qwen3 have no sliding window
  nlohmann::json qwen3 = test::tiny_qwen3_config();
  qwen3["use_sliding_window"] = false;
  for (const auto& [name, config] : {std::pair{std::string("llama"), test::tiny_llama_config()},
                                     std::pair{std::string("qwen2"), qwen2}, std::pair{std::string("qwen3"), qwen3}}) {
    SCOPED_TRACE(name);
    test::TempDir root;
    const fs::path folder = root.path() / name;
    nn::manual_seed(11);
    test::write_random_hf_folder(folder, config, DType::F32);
    auto hf = AutoModelForCausalLM::from_pretrained(folder);
    const Tensor want = hf->logits(prompt());

    const fs::path f32 = convert(folder, "f32", /*vocab_none=*/false);
    ASSERT_TRUE(is_gguf_file(f32));
    auto g = AutoModelForCausalLM::from_pretrained(f32);
    EXPECT_EQ(g->type_name(), hf->type_name());
    // Llama's q/k stay in llama.cpp's row order, paired by interleaved RoPE: the same products summed in another
    // order (measured 2.4e-7 of max |logit| ~3); qwen2 files are not reordered and match bit for bit.
    EXPECT_LE(test::max_abs_diff(g->logits(prompt()), want), name == "llama" ? 1e-5 : 0.0) << "f32";

    auto hf16 = AutoModelForCausalLM::from_pretrained(folder, {.dtype = DType::F16});
    auto g16 = AutoModelForCausalLM::from_pretrained(convert(folder, "f16", /*vocab_none=*/false));
    EXPECT_EQ(nn::get_module_tensor(*g16, "model.layers.0.self_attn.q_proj.weight").dtype(), DType::F16);
    EXPECT_LE(test::max_abs_diff(g16->logits(prompt()), hf16->logits(prompt())), name == "llama" ? 1e-5 : 0.0) << "f16";

    // q8_0: dequantized exactly; the logits move by the quantization error only.
    auto g8 = AutoModelForCausalLM::from_pretrained(convert(folder, "q8_0", /*vocab_none=*/false));
    const double err = test::max_abs_diff(g8->logits(prompt()), want);
    EXPECT_GT(err, 0.0);
    EXPECT_LT(err, 0.02 * test::max_abs(want)) << "q8_0";
  }
}

// Qwen3 (q/k norms per head, head_dim not hidden / heads): llama.cpp itself runs the file its converter wrote from a
// transformers-shaped folder, and its logits are ferry's.
TEST_F(GgufOracle, LlamaCppRunsAQwen3FileAsFerryDoes) {
  test::TempDir root;
  const fs::path folder = root.path() / "qwen3";
  nlohmann::json config = test::tiny_qwen3_config();
  config["use_sliding_window"] = false;
  config["vocab_size"] = 128;
  nn::manual_seed(13);
  test::write_random_hf_folder(folder, config, DType::F32);
  const fs::path gguf = convert(folder, "f32");
  const auto want = run_llama_cpp(gguf, {3, 14, 15, 92, 65, 35, 89, 7})["logits"].get<std::vector<double>>();
  auto model = AutoModelForCausalLM::from_pretrained(gguf);
  EXPECT_EQ(model->type_name(), "Qwen3ForCausalLM");
  const auto [diff, scale, same_greedy] = test::compare_last_logits(*model, {3, 14, 15, 92, 65, 35, 89, 7}, want);
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(diff, 1e-4 * scale);  // both f32, up to summation order
  EXPECT_TRUE(same_greedy) << "the greedy token";
  std::printf("qwen3 f32: ferry vs llama.cpp on llama.cpp's file, logits max diff %.2e (max |logit| %.2f)\n", diff,
              scale);
}

TEST_F(GgufOracle, DeviceMapsApplyToGgufModels) {
  test::TempDir root, offload("ferry-offload");
  const fs::path folder = root.path() / "llama";
  nn::manual_seed(12);
  test::write_random_hf_folder(folder, test::tiny_llama_config(), DType::F32);
  const fs::path gguf = convert(folder, "f32", /*vocab_none=*/false);
  auto resident = AutoModelForCausalLM::from_pretrained(gguf);
  DeviceMap map{{"model.embed_tokens", Device::cpu()}, {"model.layers.0", Device::cpu()},
                {"model.layers.1", Device::disk()},     {"model.norm", Device::cpu()},
                {"model.rotary_emb", Device::cpu()},    {"lm_head", Device::disk()}};
  // The disk part is read from the GGUF file itself: no offload folder needed, none written.
  auto offloaded = AutoModelForCausalLM::from_pretrained(gguf, {.device_map = map});
  EXPECT_TRUE(nn::get_module_tensor(*offloaded, "lm_head.weight").is_meta());
  EXPECT_EQ(test::max_abs_diff(offloaded->logits(prompt()), resident->logits(prompt())), 0.0);
  auto direct = AutoModelForCausalLM::from_pretrained(gguf, {.device_map = map, .offload_io = OffloadIo::Direct});
  EXPECT_EQ(test::max_abs_diff(direct->logits(prompt()), resident->logits(prompt())), 0.0) << "read direct";
  // Another dtype than the file's is not the file's bytes: that needs an offload folder (and works with one).
  const std::string msg = test::error_of([&] {
    AutoModelForCausalLM::from_pretrained(gguf, {.device_map = map, .dtype = DType::BF16});
  });
  EXPECT_NE(msg.find("offload folder"), std::string::npos) << msg;
  auto converted = AutoModelForCausalLM::from_pretrained(
      gguf, {.device_map = map, .dtype = DType::BF16, .offload_folder = offload.path()});
  auto resident_bf16 = AutoModelForCausalLM::from_pretrained(gguf, {.dtype = DType::BF16});
  EXPECT_EQ(test::max_abs_diff(converted->logits(prompt()), resident_bf16->logits(prompt())), 0.0);
}

// A quantized file with a tied head, head and embedding on disk (tied tensors share one tier): both read the
// embedding's bytes in the file.
TEST_F(GgufOracle, QuantizedTiedFileRunsWithItsDiskPartInTheFile) {
  test::TempDir root;
  const fs::path folder = root.path() / "llama";
  nlohmann::json config = test::tiny_llama_config();
  config["tie_word_embeddings"] = true;
  config["intermediate_size"] = 64;
  nn::manual_seed(13);
  test::write_random_hf_folder(folder, config, DType::F32);
  const fs::path gguf = convert(folder, "q8_0", /*vocab_none=*/false);
  auto resident = AutoModelForCausalLM::from_pretrained(gguf);
  EXPECT_EQ(nn::get_module_tensor(*resident, "model.layers.0.mlp.up_proj.weight").dtype(), DType::Q8_0);
  DeviceMap map{{"model.embed_tokens", Device::disk()}, {"model.layers.0", Device::disk()},
                {"model.layers.1", Device::cpu()},      {"model.norm", Device::cpu()},
                {"model.rotary_emb", Device::cpu()},    {"lm_head", Device::disk()}};
  auto offloaded = AutoModelForCausalLM::from_pretrained(gguf, {.device_map = map});
  EXPECT_EQ(test::max_abs_diff(offloaded->logits(prompt()), resident->logits(prompt())), 0.0);
}

}  // namespace
}  // namespace ferry::models

namespace ferry::models {
namespace {

// A GGUF image with only tokenizer metadata, written field by field.
std::vector<uint8_t> tokenizer_gguf(const std::string& model, const std::string& pre, bool add_bos) {
  std::vector<uint8_t> b;
  auto pod = [&](auto v) { b.insert(b.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + sizeof v); };
  auto str = [&](const std::string& s) {
    pod(uint64_t(s.size()));
    b.insert(b.end(), s.begin(), s.end());
  };
  auto kv_str = [&](const std::string& k, const std::string& v) { str(k); pod(uint32_t(8)); str(v); };
  auto kv_strs = [&](const std::string& k, const std::vector<std::string>& v) {
    str(k);
    pod(uint32_t(9));
    pod(uint32_t(8));
    pod(uint64_t(v.size()));
    for (const auto& s : v) str(s);
  };
  pod(uint32_t(0x46554747));
  pod(uint32_t(3));
  pod(uint64_t(0));
  pod(uint64_t(7));
  kv_str("tokenizer.ggml.model", model);
  kv_str("tokenizer.ggml.pre", pre);
  // Byte-level pieces: "Ġ" is the space byte.
  kv_strs("tokenizer.ggml.tokens", {"<s>", "h", "i", "Ġ", "hi", "Ġhi", "</s>"});
  kv_strs("tokenizer.ggml.merges", {"h i", "Ġ hi"});
  str("tokenizer.ggml.token_type");
  pod(uint32_t(9));
  pod(uint32_t(5));
  pod(uint64_t(7));
  for (int32_t t : {3, 1, 1, 1, 1, 1, 3}) pod(t);
  str("tokenizer.ggml.add_bos_token");
  pod(uint32_t(7));
  pod(uint8_t(add_bos));
  str("tokenizer.ggml.bos_token_id");
  pod(uint32_t(4));
  pod(uint32_t(0));
  return b;
}

TEST(GgufTokenizer, ByteLevelBpeFromMetadata) {
  const auto bytes = tokenizer_gguf("gpt2", "smollm", true);
  const io::GgufFile f = io::GgufFile::parse(bytes, "tok.gguf");
  const nlohmann::json j = gguf_tokenizer_json(f);
  EXPECT_EQ(j["model"]["type"], "BPE");
  EXPECT_EQ(j["model"]["vocab"]["Ġhi"], 5);
  EXPECT_EQ(j["model"]["merges"], nlohmann::json::array({"h i", "Ġ hi"}));
  ASSERT_EQ(j["added_tokens"].size(), 2u);  // the two CONTROL tokens
  EXPECT_EQ(j["added_tokens"][0]["content"], "<s>");
  EXPECT_EQ(j["pre_tokenizer"]["pretokenizers"].size(), 3u);  // \p{N}, the GPT-2 regex, byte-level
  EXPECT_EQ(j["post_processor"]["type"], "TemplateProcessing");  // add_bos_token
  EXPECT_TRUE(gguf_tokenizer_json(io::GgufFile::parse(tokenizer_gguf("gpt2", "gpt2", false), "t"))["post_processor"].is_null());
  // The document loads into ferry's tokenizer: "hi hi" is "hi" + "Ġhi" after BOS; "<s>" in text is the control token.
  const text::Tokenizer tok = text::Tokenizer::from_json(j.dump());
  EXPECT_EQ(tok.encode("hi hi"), (std::vector<text::TokenId>{0, 4, 5}));
  EXPECT_EQ(tok.encode("<s>hi", false), (std::vector<text::TokenId>{0, 4}));
  EXPECT_EQ(tok.decode(std::vector<text::TokenId>{4, 5}), "hi hi");
  // BLOOM's one split regex (llama.cpp's "bloom", as its libllama spells it), then byte level.
  const nlohmann::json bloom = gguf_tokenizer_json(io::GgufFile::parse(tokenizer_gguf("gpt2", "bloom", false), "b"));
  ASSERT_EQ(bloom["pre_tokenizer"]["pretokenizers"].size(), 2u);
  EXPECT_EQ(bloom["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], " ?[^(\\s|.,!?…。，、।۔،)]+");
  EXPECT_EQ(text::Tokenizer::from_json(bloom.dump()).encode("hi hi", false), (std::vector<text::TokenId>{4, 5}));
}

TEST(GgufTokenizer, WhatFerryCannotReproduceIsRefusedByName) {
  std::string msg = test::error_of([] { gguf_tokenizer_json(io::GgufFile::parse(tokenizer_gguf("bert", "default", false), "wp.gguf")); });
  EXPECT_NE(msg.find("tokenizer.ggml.model"), std::string::npos) << msg;
  // A SentencePiece vocabulary without its scores cannot be merged as llama.cpp merges it.
  msg = test::error_of([] { gguf_tokenizer_json(io::GgufFile::parse(tokenizer_gguf("llama", "default", false), "spm.gguf")); });
  EXPECT_NE(msg.find("tokenizer.ggml.scores"), std::string::npos) << msg;
  msg = test::error_of([] { gguf_tokenizer_json(io::GgufFile::parse(tokenizer_gguf("gpt2", "chameleon", false), "c.gguf")); });
  EXPECT_NE(msg.find("chameleon"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ferry::models
