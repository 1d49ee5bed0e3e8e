// Dense families from GGUF files llama.cpp's own converter writes (issue 33): Llama 3.1+ (its rope scaling stored as
// the rope_freqs tensor), GPT-NeoX (gptneox: query_key_value reordered to q | k | v blocks) and Phi-3 (phi3: fused
// projections, LongRoPE factors as tensors). Folders made by ferry's writer (whose families are checked against
// transformers in hf_reference_test.cc) are converted; each file must compute what the folder computes, and what
// llama.cpp itself computes on it. Skipped without the reference venv (scripts/venv).
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

class GgufFamilies : public test::LlamaCppOracleTest {};

// f32 files compute the folder's logits (same arithmetic, up to summation order), and llama.cpp's (its KV cache in
// f32); q8_0 files llama.cpp's greedy ids.
TEST_F(GgufFamilies, LlamaCppConvertedFilesComputeAsTheFolderAndAsLlamaCpp) {
  const std::vector<std::pair<std::string, nlohmann::json>> cases{{"llama3_rope", llama3_config()},
                                                                  {"gpt_neox_parallel", gpt_neox_config(true)},
                                                                  {"gpt_neox_sequential", gpt_neox_config(false)},
                                                                  {"phi3", phi3_config(false)},
                                                                  {"phi3_longrope", phi3_config(true)}};
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
    // erf GELU (the file does not say which): measured 8e-5 and 1.5e-4 of max |logit|; the others 1e-7.
    const double tolerance = name.starts_with("gpt_neox") ? 5e-4 : 1e-4;
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
