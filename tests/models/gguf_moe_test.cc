// Mixtures of experts from GGUF files (issue 32): random Mixtral, Qwen2-MoE and Qwen3-MoE folders converted by
// llama.cpp's own convert_hf_to_gguf.py (stacked ffn_{gate,up,down}_exps) load into one module per expert and compute
// what the folder computes, and what llama.cpp itself computes on the file; an expert placed on disk is read from its
// slice of the file. Skipped without the reference venv (scripts/venv).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ferry/big_modeling/experts.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/gguf_model.h"
#include "ferry/nn/init.h"
#include "ferry/nn/module_tensors.h"
#include "support/error_of.h"
#include "support/hf_folder.h"
#include "support/llama_cpp_oracle.h"

namespace ferry::models {
namespace {

namespace fs = std::filesystem;

const std::vector<int64_t> kPrompt{3, 14, 15, 92, 65, 35, 89, 7, 21, 44};
Tensor prompt() { return Tensor::from_vector(kPrompt, {static_cast<int64_t>(kPrompt.size())}); }

TEST(GgufMoeNames, StackedExpertsNameEveryExpertsSlice) {
  const GgufArchitecture* llama = find_gguf_architecture("llama", /*experts=*/true);
  ASSERT_NE(llama, nullptr);
  EXPECT_EQ(llama->hf_architecture, "MixtralForCausalLM");
  EXPECT_EQ(find_gguf_architecture("llama")->hf_architecture, "LlamaForCausalLM");
  EXPECT_EQ(find_gguf_architecture("llama", false)->hf_architecture, "LlamaForCausalLM");
  EXPECT_EQ(find_gguf_architecture("qwen2moe", false)->hf_architecture, "Qwen2MoeForCausalLM");  // only one kind
  const auto mixtral = hf_expert_names(*llama->tensors, "blk.3.ffn_down_exps.weight");
  ASSERT_TRUE(mixtral);
  EXPECT_EQ(mixtral->first + "5" + mixtral->second, "model.layers.3.block_sparse_moe.experts.5.w2.weight");
  EXPECT_EQ(hf_tensor_name(*llama->tensors, "blk.3.ffn_gate_inp.weight"),
            "model.layers.3.block_sparse_moe.gate.weight");
  const GgufArchitecture* qwen2moe = find_gguf_architecture("qwen2moe");
  ASSERT_NE(qwen2moe, nullptr);
  EXPECT_FALSE(qwen2moe->moe_normalizes_top_k);
  const auto qwen = hf_expert_names(*qwen2moe->tensors, "blk.0.ffn_up_exps.weight");
  ASSERT_TRUE(qwen);
  EXPECT_EQ(qwen->first + "0" + qwen->second, "model.layers.0.mlp.experts.0.up_proj.weight");
  EXPECT_EQ(hf_tensor_name(*qwen2moe->tensors, "blk.1.ffn_gate_inp_shexp.weight"),
            "model.layers.1.mlp.shared_expert_gate.weight");
  EXPECT_TRUE(find_gguf_architecture("qwen3moe") && find_gguf_architecture("qwen3moe")->moe_normalizes_top_k);
  EXPECT_FALSE(hf_expert_names(*llama->tensors, "blk.3.ffn_down.weight"));
  EXPECT_FALSE(hf_expert_names(*llama->tensors, "blk.3.ffn_down_exps.bias"));
}

TEST(GgufMoeNames, SlicesOfAStackedTensorAreItsContiguousParts) {
  io::GgufTensorInfo stacked{"blk.0.ffn_gate_exps.weight", {64, 16, 4}, GgmlType::F32, 1024, 64 * 16 * 4 * 4};
  const io::GgufTensorInfo s = stacked.slice(2);
  EXPECT_EQ(s.name, "blk.0.ffn_gate_exps.weight[2]");
  EXPECT_EQ(s.shape(), (Shape{16, 64}));
  EXPECT_EQ(s.nbytes, 64u * 16 * 4);
  EXPECT_EQ(s.offset, 1024u + 2 * 64 * 16 * 4);
  EXPECT_NE(test::error_of([&] { stacked.slice(4); }).find("out of range"), std::string::npos);
  EXPECT_NE(test::error_of([&] { s.slice(-1); }).find("out of range"), std::string::npos);
  io::GgufTensorInfo flat{"output_norm.weight", {64}, GgmlType::F32, 0, 256};
  EXPECT_NE(test::error_of([&] { flat.slice(0); }).find("1-D"), std::string::npos);
}

class GgufMoe : public test::LlamaCppOracleTest {
 protected:
  std::vector<double> llama_cpp_logits(const fs::path& gguf) {
    return run_llama_cpp(gguf, kPrompt)["logits"].get<std::vector<double>>();
  }
};

// The three families as llama.cpp runs them: no sliding windows (its mixtral, qwen2moe and qwen3moe have none), every
// layer sparse (qwen2moe has no dense layers, and its converter refuses them), Qwen2-MoE's top-k unnormalised and
// Qwen3-MoE's normalised (llama.cpp's choices, which the files do not record), a 128-token vocabulary (llama.cpp's
// vocabulary-less files).
std::vector<std::pair<std::string, nlohmann::json>> llama_cpp_shaped_moe_configs(int64_t width = 64) {
  nlohmann::json mixtral = test::tiny_mixtral_config();
  mixtral.erase("sliding_window");
  nlohmann::json qwen2 = test::tiny_qwen2_moe_config();
  qwen2.erase("mlp_only_layers");
  qwen2["use_sliding_window"] = false;
  qwen2["norm_topk_prob"] = false;
  qwen2["tie_word_embeddings"] = false;  // llama.cpp's qwen2moe needs output.weight
  nlohmann::json qwen3 = test::tiny_qwen3_moe_config();
  qwen3["use_sliding_window"] = false;
  std::vector<std::pair<std::string, nlohmann::json>> out{{"mixtral", mixtral},
                                                          {"qwen2_moe", qwen2},
                                                          {"qwen3_moe", qwen3}};
  for (auto& [name, c] : out) {
    c["vocab_size"] = 128;
    c["rope_theta"] = 1e6;     // written to the file (absent, Mixtral's folder default and llama.cpp's differ)
    c["hidden_size"] = width;  // 64: whole q8_0 blocks in every row; 256: whole k-quant super-blocks
    c["intermediate_size"] = width;
    c["moe_intermediate_size"] = width == 64 ? 32 : width;
    c["shared_expert_intermediate_size"] = width == 64 ? 32 : width;
    if (name == "qwen3_moe" && width == 256) c["head_dim"] = 64;
  }
  return out;
}

// f32 files compute the folder's logits (Mixtral's q/k rows stay in llama.cpp's interleaved order: the same products
// in another order) and llama.cpp's at 1e-4; q8_0 files compute llama.cpp's greedy token; with every expert on disk the
// logits are the resident ones bit for bit, each expert read from its slice of the file.
TEST_F(GgufMoe, LlamaCppConvertedMixturesComputeAsTheFolderAndAsLlamaCpp) {
  for (const auto& [name, config] : llama_cpp_shaped_moe_configs()) {
    SCOPED_TRACE(name);
    test::TempDir root;
    const fs::path folder = root.path() / name;
    nn::manual_seed(21);
    test::write_random_hf_folder(folder, config, DType::F32);
    auto hf = AutoModelForCausalLM::from_pretrained(folder);
    const Tensor want = hf->logits(prompt());

    const fs::path f32 = convert(folder, "f32");
    auto g = AutoModelForCausalLM::from_pretrained(f32);
    EXPECT_EQ(g->type_name(), hf->type_name());
    EXPECT_EQ(g->info().experts.num_experts, hf->info().experts.num_experts);
    EXPECT_EQ(g->info().experts.experts_per_token, hf->info().experts.experts_per_token);
    EXPECT_LE(test::max_abs_diff(g->logits(prompt()), want), 1e-5 * test::max_abs(want)) << "f32 file vs folder";

    const test::ComparedLogits f32_vs_llama = test::compare_last_logits(*g, kPrompt, llama_cpp_logits(f32));
    EXPECT_GT(f32_vs_llama.scale, 0.0);
    EXPECT_LE(f32_vs_llama.diff, 1e-4 * f32_vs_llama.scale) << "f32: ferry vs llama.cpp";
    EXPECT_TRUE(f32_vs_llama.same_greedy);
    std::printf("%s f32: ferry vs llama.cpp on llama.cpp's file, logits max diff %.2e (max |logit| %.2f)\n",
                name.c_str(), f32_vs_llama.diff, f32_vs_llama.scale);

    const fs::path q8 = convert(folder, "q8_0");
    auto g8 = AutoModelForCausalLM::from_pretrained(q8);
    const std::string expert = g->info().experts.expert_class;
    const std::string w = expert_module_names(*g8, {expert}).front();
    EXPECT_EQ(nn::get_module_tensor(*g8, w + (name == "mixtral" ? ".w1.weight" : ".gate_proj.weight")).dtype(),
              DType::Q8_0);
    const test::ComparedLogits q8_vs_llama = test::compare_last_logits(*g8, kPrompt, llama_cpp_logits(q8));
    EXPECT_TRUE(q8_vs_llama.same_greedy);
    EXPECT_LE(q8_vs_llama.diff, 0.03 * q8_vs_llama.scale) << "q8_0: ferry vs llama.cpp";
    std::printf("%s q8_0: ferry vs llama.cpp, logits max diff %.2e (max |logit| %.2f)\n", name.c_str(),
                q8_vs_llama.diff, q8_vs_llama.scale);

    // Every expert on disk, read from the file itself (no offload folder), no expert cache: bit-identical.
    const DeviceMap map = place_experts(*g8, DeviceMap{{"", Device::cpu()}}, {expert},
                                        [](const std::string&) { return Device::disk(); });
    auto offloaded = AutoModelForCausalLM::from_pretrained(q8, {.device_map = map, .expert_cache_bytes = 0});
    EXPECT_TRUE(
        nn::get_module_tensor(*offloaded, w + (name == "mixtral" ? ".w2.weight" : ".down_proj.weight")).is_meta());
    EXPECT_EQ(test::max_abs_diff(offloaded->logits(prompt()), g8->logits(prompt())), 0.0) << "experts on disk";
    // The same read direct (O_DIRECT from the file into the staging pool), each expert at its slice's offset.
    auto direct = AutoModelForCausalLM::from_pretrained(q8, {.device_map = map,
                                                             .expert_cache_bytes = 0,
                                                             .offload_io = OffloadIo::Direct});
    EXPECT_EQ(test::max_abs_diff(direct->logits(prompt()), g8->logits(prompt())), 0.0) << "experts read direct";
  }
}

// Q4_K_M files made by llama.cpp's own quantizer (hidden and expert widths of whole 256-element super-blocks, so the
// experts are q4_k and q6_k as in the Hub's files) compute llama.cpp's logits and greedy ids.
TEST_F(GgufMoe, Q4KMFilesFromLlamaCppsQuantizerGenerateItsGreedyIds) {
  for (const auto& [name, config] : llama_cpp_shaped_moe_configs(256)) {
    SCOPED_TRACE(name);
    test::TempDir root;
    const fs::path folder = root.path() / name;
    nn::manual_seed(23);
    test::write_random_hf_folder(folder, config, DType::F32);
    const nlohmann::json want = run_llama_cpp(convert(folder, "f32"), kPrompt, {"--quantize=q4_k_m", "--greedy=8"});
    auto model = AutoModelForCausalLM::from_pretrained(want["model"].get<std::string>());
    const std::string expert = model->info().experts.expert_class;
    const std::string first = expert_module_names(*model, {expert}).front();
    EXPECT_EQ(nn::get_module_tensor(*model, first + (name == "mixtral" ? ".w1.weight" : ".gate_proj.weight")).dtype(),
              DType::Q4_K);

    test::expect_greedy_like_llama_cpp(*model, kPrompt, want, name + " q4_k_m");
  }
}

// `ferry quantize` (export_gguf) writes a mixture of experts as llama.cpp's converter does — each layer's experts
// stacked, expert k at slice k — and llama.cpp runs the file: f32 computes the folder's logits, q4_k_m llama.cpp's
// greedy ids. What llama.cpp's architectures cannot express (dense layers, another top-k normalisation) is refused.
TEST_F(GgufMoe, FerryQuantizeWritesStackedExpertsThatLlamaCppRuns) {
  for (const auto& [name, config] : llama_cpp_shaped_moe_configs(256)) {
    SCOPED_TRACE(name);
    test::TempDir root;
    const fs::path folder = root.path() / name;
    nn::manual_seed(24);
    test::write_random_hf_folder(folder, config, DType::F32);
    auto hf = AutoModelForCausalLM::from_pretrained(folder);

    const fs::path f32 = root.path() / (name + ".f32.gguf");
    export_gguf(folder, f32, {.type = "f32"});
    auto g = AutoModelForCausalLM::from_pretrained(f32);
    EXPECT_EQ(g->type_name(), hf->type_name());
    const Tensor want = hf->logits(prompt());
    EXPECT_LE(test::max_abs_diff(g->logits(prompt()), want), 1e-5 * test::max_abs(want));

    const fs::path q4 = root.path() / (name + ".q4_k_m.gguf");
    const GgufExportReport report = export_gguf(folder, q4, {.type = "q4_k_m"});
    EXPECT_GT(report.tensors_per_type.at("q4_k"), 0);
    auto model = AutoModelForCausalLM::from_pretrained(q4);
    const std::string first = expert_module_names(*model, {model->info().experts.expert_class}).front();
    EXPECT_EQ(nn::get_module_tensor(*model, first + (name == "mixtral" ? ".w1.weight" : ".gate_proj.weight")).dtype(),
              DType::Q4_K);
    test::expect_greedy_like_llama_cpp(*model, kPrompt, run_llama_cpp(q4, kPrompt, {"--greedy=8"}),
                                       name + " ferry quantize q4_k_m");
  }
  test::TempDir root;
  nlohmann::json dense_layer = test::tiny_qwen2_moe_config();  // mlp_only_layers [1]
  test::write_random_hf_folder(root.path() / "dense", dense_layer, DType::F32);
  std::string e = test::error_of([&] { export_gguf(root.path() / "dense", root.path() / "d.gguf"); });
  EXPECT_NE(e.find("mlp_only_layers"), std::string::npos) << e;
  nlohmann::json normalised = test::tiny_qwen2_moe_config();
  normalised.erase("mlp_only_layers");
  normalised["norm_topk_prob"] = true;
  test::write_random_hf_folder(root.path() / "norm", normalised, DType::F32);
  e = test::error_of([&] { export_gguf(root.path() / "norm", root.path() / "n.gguf"); });
  EXPECT_NE(e.find("norm_topk_prob"), std::string::npos) << e;
}

}  // namespace
}  // namespace ferry::models
