// Dense families from GGUF files llama.cpp's own converter writes (issue 33): Llama 3.1+ (its rope scaling stored as
// the rope_freqs tensor), GPT-NeoX (gptneox: query_key_value reordered to q | k | v blocks), Phi-3 (phi3: fused
// projections, LongRoPE factors as tensors), BLOOM (bloom: reordered as gptneox, ALiBi) and Gemma 2 / 3 (gemma2,
// gemma3: norms stored as 1 + w). Folders made by ferry's writer (whose families are checked against transformers in
// hf_reference_test.cc) are converted; each file must compute what the folder computes, and what llama.cpp itself
// computes on it. Skipped without the reference venv (scripts/venv).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "ferry/io/gguf.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/gguf_model.h"
#include "ferry/nn/init.h"
#include "ferry/nn/module_tensors.h"
#include "ferry/nn/rotary.h"
#include "ferry/ops/rotary.h"
#include "support/error_of.h"
#include "support/hf_folder.h"
#include "support/llama_cpp_oracle.h"

namespace ferry::models {
namespace {

namespace fs = std::filesystem;

const std::vector<int64_t> kPrompt{3, 14, 15, 92, 65, 35, 89, 7, 21, 44};
Tensor prompt() { return Tensor::from_vector(kPrompt, {static_cast<int64_t>(kPrompt.size())}); }

// Llama 3.1's rope: with head_dim 16 and theta 10000, the frequencies fall in all three bands of the llama3 scaling
// for its real original context of 8192 (kept, smoothed, divided by factor), so a file without the factors differs.
nlohmann::json llama3_config() {
  nlohmann::json c = test::tiny_llama_config();
  c["hidden_size"] = 64;
  c["intermediate_size"] = 64;
  c["vocab_size"] = 128;
  c["rope_theta"] = 10000.0;
  c["max_position_embeddings"] = 131072;
  c["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  return c;
}

nlohmann::json gpt_neox_config(bool parallel_residual) {
  nlohmann::json c = test::tiny_gpt_neox_config();
  c["hidden_size"] = 64;
  c["intermediate_size"] = 64;
  c["vocab_size"] = 128;
  c["rotary_pct"] = 0.25;  // Pythia's: 4 of each head's 16 dims rotate
  c["use_parallel_residual"] = parallel_residual;
  return c;
}

// LongRoPE with an original context (8) shorter than the prompt: ferry uses the long factors for this prompt, and so
// does llama.cpp, which picks them by its context size (128) rather than by the sequence.
nlohmann::json phi3_config(bool longrope) {
  nlohmann::json c = test::tiny_phi3_config();
  c["hidden_size"] = 64;
  c["intermediate_size"] = 64;
  c["vocab_size"] = 128;
  c["sliding_window"] = nullptr;  // llama.cpp's phi3 attends to the whole context
  c.erase("rope_parameters");
  if (longrope) {
    c["original_max_position_embeddings"] = 8;
    c["rope_scaling"] = {{"rope_type", "longrope"},
                         {"short_factor", {1.0, 1.25, 1.5, 2.0}},
                         {"long_factor", {2.0, 3.0, 5.0, 8.0}}};
  } else {
    c["original_max_position_embeddings"] = 64;
  }
  return c;
}

// BLOOM (bloom: query_key_value reordered as for gptneox, the embedding's norm as token_embd_norm, ALiBi with no keys
// of its own): rows of 96 and 384 (whole q8_0 blocks); 6 heads (slopes of 4, then 2 interleaved), tied, or 8, untied.
nlohmann::json bloom_config(int64_t heads, bool tied) {
  nlohmann::json c = test::tiny_bloom_config();
  c["hidden_size"] = 96;
  c["n_head"] = heads;
  c["vocab_size"] = 128;
  c["tie_word_embeddings"] = tied;
  return c;
}

// Gemma 2 and 3 (gemma2, gemma3: the converter stores every norm weight as 1 + w). What the files leave to llama.cpp
// is set as llama.cpp has it: scores scaled by 1/√head_dim (query_pre_attn_scalar = head_dim), Gemma 3's sliding
// layers rotating with base 10000 and every sixth layer global (6 layers: layer 5).
nlohmann::json gemma2_config() {
  nlohmann::json c = test::tiny_gemma2_config();
  c["query_pre_attn_scalar"] = 8;  // head_dim
  return c;
}
nlohmann::json gemma3_config() {
  nlohmann::json c = test::tiny_gemma3_config();
  c.erase("layer_types");
  c.erase("rope_parameters");
  c.erase("tie_word_embeddings");  // tied (the default): logits of ~20, fewer near ties in the greedy steps
  c.update({{"num_hidden_layers", 6},
            {"query_pre_attn_scalar", 8},
            {"rope_theta", 1000.0},
            {"rope_local_base_freq", 10000.0},
            {"rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}}}});
  return c;
}

class GgufFamilies : public test::LlamaCppOracleTest {};

// f32 files compute the folder's logits (same arithmetic, up to summation order), and llama.cpp's (its KV cache in
// f32); q8_0 files llama.cpp's greedy ids.
TEST_F(GgufFamilies, LlamaCppConvertedFilesComputeAsTheFolderAndAsLlamaCpp) {
  const std::vector<std::pair<std::string, nlohmann::json>> cases{{"llama3_rope", llama3_config()},
                                                                  {"gpt_neox_parallel", gpt_neox_config(true)},
                                                                  {"gpt_neox_sequential", gpt_neox_config(false)},
                                                                  {"phi3", phi3_config(false)},
                                                                  {"phi3_longrope", phi3_config(true)},
                                                                  {"bloom_heads6_tied", bloom_config(6, true)},
                                                                  {"bloom_heads8_untied", bloom_config(8, false)},
                                                                  {"gemma2", gemma2_config()},
                                                                  {"gemma3", gemma3_config()}};
  for (const auto& [name, config] : cases) {
    SCOPED_TRACE(name);
    test::TempDir root;
    const fs::path folder = root.path() / name;
    nn::manual_seed(31);
    test::write_random_hf_folder(folder, config, DType::F32);
    auto hf = AutoModelForCausalLM::from_pretrained(folder);
    const Tensor want = hf->logits(prompt());

    const fs::path f32 = convert(folder, "f32");
    auto g = AutoModelForCausalLM::from_pretrained(f32);
    EXPECT_EQ(g->type_name(), hf->type_name());
    const double vs_folder = test::max_abs_diff(g->logits(prompt()), want);
    EXPECT_LE(vs_folder, 1e-5 * test::max_abs(want)) << "f32 file vs folder";

    const auto vs_llama = test::compare_last_logits(*g, kPrompt, run_llama_cpp(f32, kPrompt)["logits"]);
    EXPECT_GT(vs_llama.scale, 0.0);
    // llama.cpp's gptneox computes GELU with ggml_gelu (tanh-approximated, through an f16 table), the folder exact
    // erf GELU (the file does not say which): measured 8e-5 and 1.5e-4 of max |logit|; the others 1e-7. BLOOM's
    // folder computes the tanh GELU in f32, llama.cpp through that table: measured 2.3e-5 and 8.4e-5; Gemma's
    // gelu_pytorch_tanh likewise: 1.7e-4 (gemma2), 1.1e-4 (gemma3).
    const bool table_gelu = name.starts_with("gpt_neox") || name.starts_with("bloom") || name.starts_with("gemma");
    const double tolerance = table_gelu ? 5e-4 : 1e-4;
    EXPECT_LE(vs_llama.diff, tolerance * vs_llama.scale) << "f32: ferry vs llama.cpp";
    EXPECT_TRUE(vs_llama.same_greedy);
    std::printf("%s f32: file vs folder %.2e; ferry vs llama.cpp on llama.cpp's file %.2e (max |logit| %.2f)\n",
                name.c_str(), vs_folder, vs_llama.diff, vs_llama.scale);

    const fs::path q8 = convert(folder, "q8_0");
    auto g8 = AutoModelForCausalLM::from_pretrained(q8);
    // Both quantize activations to 8 bits per 32 values, rounding differently: measured up to 1e-2 of max |logit|.
    test::expect_greedy_like_llama_cpp(*g8, kPrompt, run_llama_cpp(q8, kPrompt, {"--greedy=8"}), name + " q8_0", 0.03);
  }
}

// Without its rope factors a Llama 3.1 file would be a different model: the factors are what makes it equal.
TEST_F(GgufFamilies, Llama3RopeFactorsAreReadFromRopeFreqs) {
  test::TempDir root;
  const fs::path folder = root.path() / "llama3";
  nn::manual_seed(32);
  test::write_random_hf_folder(folder, llama3_config(), DType::F32);
  const io::GgufFile file = io::GgufFile::open(convert(folder, "f32"));
  ASSERT_NE(file.find_tensor("rope_freqs.weight"), nullptr);
  const ConfigJson config = gguf_config(file);
  const nn::RopeParameters rope = config.rope_parameters(config.require_int("max_position_embeddings"));
  EXPECT_EQ(rope.rope_type, "frequency_factors");
  ASSERT_EQ(rope.frequency_factors.size(), 8u);
  EXPECT_EQ(rope.frequency_factors.front(), 1.0);       // the highest frequency is kept
  EXPECT_FLOAT_EQ(rope.frequency_factors.back(), 8.0);  // the lowest divided by factor
  // inv_freq as the folder computes it, to f32 rounding.
  nlohmann::json folder_json = llama3_config();
  const ConfigJson from_folder = ConfigJson::from_json(folder_json, "folder");
  const auto a = nn::rope_inverse_frequencies(16, rope).to_vector<float>();
  const auto b = nn::rope_inverse_frequencies(16, from_folder.rope_parameters(131072)).to_vector<float>();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * b[i]) << i;
  EXPECT_GT(std::abs(a.back() - ops::rope_inv_freq(16, 10000.0).to_vector<float>().back()), 0.0f);
}

// A GGUF model's layers on disk are read from the file itself: the resident logits, bit for bit.
TEST_F(GgufFamilies, GptNeoXLayersOnDiskAreReadFromTheFile) {
  test::TempDir root;
  const fs::path folder = root.path() / "neox";
  nn::manual_seed(33);
  test::write_random_hf_folder(folder, gpt_neox_config(true), DType::F32);
  const fs::path q8 = convert(folder, "q8_0");
  auto resident = AutoModelForCausalLM::from_pretrained(q8);
  EXPECT_EQ(nn::get_module_tensor(*resident, "gpt_neox.layers.0.attention.query_key_value.weight").dtype(),
            DType::Q8_0);
  const DeviceMap map{{"gpt_neox.embed_in", Device::cpu()},
                      {"gpt_neox.emb_dropout", Device::cpu()},
                      {"gpt_neox.layers.0", Device::disk()},
                      {"gpt_neox.layers.1", Device::disk()},
                      {"gpt_neox.final_layer_norm", Device::cpu()},
                      {"gpt_neox.rotary_emb", Device::cpu()},
                      {"embed_out", Device::disk()}};
  for (OffloadIo io : {OffloadIo::Mmap, OffloadIo::Direct}) {
    auto offloaded = AutoModelForCausalLM::from_pretrained(q8, {.device_map = map, .offload_io = io});
    EXPECT_TRUE(nn::get_module_tensor(*offloaded, "gpt_neox.layers.1.mlp.dense_h_to_4h.weight").is_meta());
    EXPECT_EQ(test::max_abs_diff(offloaded->logits(prompt()), resident->logits(prompt())), 0.0);
  }
}

// `ferry quantize` writes Llama 3.1's rope scaling as llama.cpp's converter does (rope_freqs), from a folder and
// from a GGUF; llama.cpp runs the file to the folder's logits. Families ferry reads but does not write are refused.
TEST_F(GgufFamilies, FerryQuantizeWritesLlama3RopeFactors) {
  test::TempDir root;
  const fs::path folder = root.path() / "llama3";
  nn::manual_seed(34);
  test::write_random_hf_folder(folder, llama3_config(), DType::F32);
  auto hf = AutoModelForCausalLM::from_pretrained(folder);
  const fs::path out = root.path() / "ferry.f32.gguf";
  export_gguf(folder, out, {.type = "f32"});
  ASSERT_NE(io::GgufFile::open(out).find_tensor("rope_freqs.weight"), nullptr);
  const auto vs_llama = test::compare_last_logits(*hf, kPrompt, run_llama_cpp(out, kPrompt)["logits"]);
  EXPECT_LE(vs_llama.diff, 1e-4 * vs_llama.scale) << "llama.cpp on ferry's file vs the folder";
  EXPECT_TRUE(vs_llama.same_greedy);
  const fs::path again = root.path() / "again.f32.gguf";
  export_gguf(out, again, {.type = "f32"});  // GGUF -> GGUF keeps the factors bit for bit
  EXPECT_EQ(test::max_abs_diff(io::GgufFile::open(again).tensor("rope_freqs.weight"),
                               io::GgufFile::open(out).tensor("rope_freqs.weight")),
            0.0);

  test::write_random_hf_folder(root.path() / "neox", gpt_neox_config(true), DType::F32);
  const std::string e = test::error_of([&] { export_gguf(root.path() / "neox", root.path() / "n.gguf"); });
  EXPECT_NE(e.find("gpt_neox"), std::string::npos) << e;
}

}  // namespace
}  // namespace ferry::models
