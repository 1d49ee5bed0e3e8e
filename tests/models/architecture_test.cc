// Each architecture's module tree: parameter names equal to the Hugging Face checkpoint keys (in transformers'
// order), shapes, class names (what no_split_module_classes match), ties, and an empty build that allocates nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "ferry/core/error.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/gpt2.h"
#include "ferry/models/gpt_neox.h"
#include "ferry/models/gptj.h"
#include "ferry/models/llama.h"
#include "ferry/models/opt.h"
#include "ferry/models/phi3.h"
#include "ferry/nn/empty_weights.h"
#include "ferry/nn/module_tensors.h"
#include "ferry/nn/tied.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

std::shared_ptr<CausalLM> build_empty(const nlohmann::json& config, DType dtype = DType::F32) {
  auto guard = nn::init_empty_weights();
  return AutoModelForCausalLM::from_config(ConfigJson::from_json(config), dtype);
}

std::vector<std::string> keys(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, t] : m.state_dict()) out.push_back(name);
  return out;
}

Shape get_module_tensor_shape(const nn::Module& m, const std::string& name) {
  return nn::get_module_tensor(m, name).shape();
}

std::string type_at(const nn::Module& m, const std::string& name) { return m.get_submodule(name).type_name(); }

std::vector<std::string> llama_keys(bool qkv_bias, bool tied_listed) {
  std::vector<std::string> k = {"model.embed_tokens.weight"};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
      k.push_back(p + "self_attn." + proj + ".weight");
      if (qkv_bias) k.push_back(p + "self_attn." + proj + ".bias");
    }
    k.push_back(p + "self_attn.o_proj.weight");
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) k.push_back(p + "mlp." + proj + ".weight");
    k.push_back(p + "input_layernorm.weight");
    k.push_back(p + "post_attention_layernorm.weight");
  }
  k.push_back("model.norm.weight");
  if (tied_listed) k.push_back("lm_head.weight");
  return k;
}

TEST(LlamaArchitecture, KeysShapesAndClassNamesAreTransformers) {
  auto model = build_empty(test::tiny_llama_config());
  EXPECT_EQ(model->type_name(), "LlamaForCausalLM");
  EXPECT_THAT(keys(*model), ElementsAreArray(llama_keys(false, true)));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.0.self_attn.q_proj.weight"), (Shape{32, 32}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.0.self_attn.k_proj.weight"), (Shape{16, 32}));  // 2 kv heads
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.1.mlp.down_proj.weight"), (Shape{32, 48}));
  EXPECT_EQ(get_module_tensor_shape(*model, "lm_head.weight"), (Shape{96, 32}));
  EXPECT_EQ(type_at(*model, "model"), "LlamaModel");
  EXPECT_EQ(type_at(*model, "model.layers"), "ModuleList");
  EXPECT_EQ(type_at(*model, "model.layers.0"), "LlamaDecoderLayer");
  EXPECT_EQ(type_at(*model, "model.layers.0.self_attn"), "LlamaAttention");
  EXPECT_EQ(type_at(*model, "model.layers.0.mlp"), "LlamaMLP");
  EXPECT_EQ(type_at(*model, "model.layers.0.input_layernorm"), "LlamaRMSNorm");
  EXPECT_EQ(type_at(*model, "model.rotary_emb"), "LlamaRotaryEmbedding");
  EXPECT_EQ(type_at(*model, "lm_head"), "Linear");
  EXPECT_EQ(model->info().block_class, "LlamaDecoderLayer");
  EXPECT_EQ(model->info().layers_prefix, "model.layers");
  EXPECT_TRUE(nn::find_tied_parameters(*model).empty());
}

TEST(LlamaArchitecture, MistralAndQwen2CarryTheirClassNames) {
  auto mistral = build_empty(test::tiny_mistral_config());
  EXPECT_EQ(mistral->type_name(), "MistralForCausalLM");
  EXPECT_EQ(type_at(*mistral, "model.layers.1"), "MistralDecoderLayer");
  EXPECT_EQ(type_at(*mistral, "model.norm"), "MistralRMSNorm");
  EXPECT_EQ(mistral->info().block_class, "MistralDecoderLayer");
  EXPECT_THAT(keys(*mistral), ElementsAreArray(llama_keys(false, true)));

  auto qwen2 = build_empty(test::tiny_qwen2_config());
  EXPECT_EQ(qwen2->type_name(), "Qwen2ForCausalLM");
  EXPECT_EQ(type_at(*qwen2, "model.layers.0.self_attn"), "Qwen2Attention");
  EXPECT_EQ(type_at(*qwen2, "model.rotary_emb"), "Qwen2RotaryEmbedding");
  EXPECT_THAT(keys(*qwen2), ElementsAreArray(llama_keys(true, true)));
  // tie_word_embeddings: one slot under two names, listed first under the embedding.
  EXPECT_THAT(nn::find_tied_parameters(*qwen2),
              ElementsAre(ElementsAre("lm_head.weight", "model.embed_tokens.weight")));
  const auto params = qwen2->named_parameters();
  EXPECT_EQ(params.front().first, "model.embed_tokens.weight");
  EXPECT_NE(params.back().first, "lm_head.weight");
}

// Qwen3: q_norm / k_norm over head_dim after o_proj (transformers' registration order), no q/k/v biases unless
// attention_bias (then on all four), head_dim 128 when the config has none.
TEST(LlamaArchitecture, Qwen3NormsEachQueryAndKeyHead) {
  auto qwen3 = build_empty(test::tiny_qwen3_config());
  EXPECT_EQ(qwen3->type_name(), "Qwen3ForCausalLM");
  EXPECT_EQ(qwen3->info().block_class, "Qwen3DecoderLayer");
  EXPECT_EQ(type_at(*qwen3, "model.layers.0.self_attn.q_norm"), "Qwen3RMSNorm");
  EXPECT_EQ(get_module_tensor_shape(*qwen3, "model.layers.0.self_attn.q_norm.weight"), (Shape{12}));
  EXPECT_EQ(get_module_tensor_shape(*qwen3, "model.layers.1.self_attn.k_norm.weight"), (Shape{12}));
  EXPECT_EQ(get_module_tensor_shape(*qwen3, "model.layers.0.self_attn.q_proj.weight"), (Shape{48, 32}));
  std::vector<std::string> want = llama_keys(false, true);
  for (int i = 1; i >= 0; --i) {  // after each layer's o_proj
    const std::string o = "model.layers." + std::to_string(i) + ".self_attn.o_proj.weight";
    auto at = std::find(want.begin(), want.end(), o) + 1;
    want.insert(at, {"model.layers." + std::to_string(i) + ".self_attn.q_norm.weight",
                     "model.layers." + std::to_string(i) + ".self_attn.k_norm.weight"});
  }
  EXPECT_THAT(keys(*qwen3), ElementsAreArray(want));
  nlohmann::json c = test::tiny_qwen3_config();
  c.erase("head_dim");
  c["attention_bias"] = true;
  auto defaults = build_empty(c);
  EXPECT_EQ(get_module_tensor_shape(*defaults, "model.layers.0.self_attn.q_proj.weight"), (Shape{4 * 128, 32}));
  EXPECT_EQ(get_module_tensor_shape(*defaults, "model.layers.0.self_attn.o_proj.bias"), (Shape{32}));
  EXPECT_EQ(get_module_tensor_shape(*defaults, "model.layers.0.self_attn.k_proj.bias"), (Shape{2 * 128}));
}

TEST(LlamaArchitecture, BiasesAndHeadDimFromConfig) {
  nlohmann::json c = test::tiny_llama_config();
  c["attention_bias"] = true;
  c["mlp_bias"] = true;
  c["head_dim"] = 12;
  auto model = build_empty(c);
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.0.self_attn.q_proj.weight"), (Shape{48, 32}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.0.self_attn.o_proj.weight"), (Shape{32, 48}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.0.self_attn.o_proj.bias"), (Shape{32}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.0.mlp.up_proj.bias"), (Shape{48}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.rotary_emb.inv_freq"), (Shape{6}));
}

TEST(GPT2Architecture, KeysShapesAndClassNamesAreTransformers) {
  auto model = build_empty(test::tiny_gpt2_config());
  std::vector<std::string> want = {"transformer.wte.weight", "transformer.wpe.weight"};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    for (const char* n : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                          "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                          "mlp.c_proj.weight", "mlp.c_proj.bias"})
      want.push_back(p + n);
  }
  want.insert(want.end(), {"transformer.ln_f.weight", "transformer.ln_f.bias", "lm_head.weight"});
  EXPECT_THAT(keys(*model), ElementsAreArray(want));
  EXPECT_EQ(get_module_tensor_shape(*model, "transformer.h.0.attn.c_attn.weight"), (Shape{32, 96}));  // Conv1D [in, out]
  EXPECT_EQ(get_module_tensor_shape(*model, "transformer.h.0.mlp.c_fc.weight"), (Shape{32, 128}));
  EXPECT_EQ(get_module_tensor_shape(*model, "transformer.wpe.weight"), (Shape{64, 32}));
  EXPECT_EQ(type_at(*model, "transformer"), "GPT2Model");
  EXPECT_EQ(type_at(*model, "transformer.h.0"), "GPT2Block");
  EXPECT_EQ(type_at(*model, "transformer.h.0.attn"), "GPT2Attention");
  EXPECT_EQ(type_at(*model, "transformer.h.0.attn.c_attn"), "Conv1D");
  EXPECT_EQ(type_at(*model, "transformer.h.0.mlp"), "GPT2MLP");
  EXPECT_EQ(type_at(*model, "transformer.drop"), "Dropout");
  EXPECT_EQ(type_at(*model, "transformer.ln_f"), "LayerNorm");
  EXPECT_THAT(nn::find_tied_parameters(*model), ElementsAre(ElementsAre("lm_head.weight", "transformer.wte.weight")));
  EXPECT_EQ(model->info().block_class, "GPT2Block");
  EXPECT_EQ(model->info().base_model_prefix, "transformer");
}

TEST(GPTJArchitecture, KeysShapesAndClassNamesAreTransformers) {
  auto model = build_empty(test::tiny_gptj_config());
  std::vector<std::string> want = {"transformer.wte.weight"};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    for (const char* n : {"ln_1.weight", "ln_1.bias", "attn.k_proj.weight", "attn.v_proj.weight", "attn.q_proj.weight",
                          "attn.out_proj.weight", "mlp.fc_in.weight", "mlp.fc_in.bias", "mlp.fc_out.weight",
                          "mlp.fc_out.bias"})
      want.push_back(p + n);
  }
  want.insert(want.end(), {"transformer.ln_f.weight", "transformer.ln_f.bias", "lm_head.weight", "lm_head.bias"});
  EXPECT_THAT(keys(*model), ElementsAreArray(want));
  EXPECT_EQ(type_at(*model, "transformer.h.1"), "GPTJBlock");
  EXPECT_EQ(type_at(*model, "transformer.h.1.attn"), "GPTJAttention");
  EXPECT_EQ(type_at(*model, "transformer.h.1.mlp"), "GPTJMLP");
  EXPECT_EQ(type_at(*model, "transformer.rotary_emb"), "GPTJRotaryEmbedding");
  EXPECT_EQ(get_module_tensor_shape(*model, "transformer.rotary_emb.inv_freq"), (Shape{2}));  // rotary_dim 4
  EXPECT_TRUE(nn::find_tied_parameters(*model).empty());
}

std::vector<std::string> gpt_neox_keys(bool attention_bias, bool tied_listed) {
  std::vector<std::string> want = {"gpt_neox.embed_in.weight"};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "gpt_neox.layers." + std::to_string(i) + ".";
    for (const char* n : {"input_layernorm.weight", "input_layernorm.bias", "post_attention_layernorm.weight",
                          "post_attention_layernorm.bias", "attention.query_key_value.weight"})
      want.push_back(p + n);
    if (attention_bias) want.push_back(p + "attention.query_key_value.bias");
    want.push_back(p + "attention.dense.weight");
    if (attention_bias) want.push_back(p + "attention.dense.bias");
    for (const char* n :
         {"mlp.dense_h_to_4h.weight", "mlp.dense_h_to_4h.bias", "mlp.dense_4h_to_h.weight", "mlp.dense_4h_to_h.bias"})
      want.push_back(p + n);
  }
  want.insert(want.end(), {"gpt_neox.final_layer_norm.weight", "gpt_neox.final_layer_norm.bias"});
  if (tied_listed) want.push_back("embed_out.weight");
  return want;
}

// GPT-NeoX: transformers' GPTNeoXForCausalLM state_dict order (norms before attention in each layer), with the head
// under its checkpoint name embed_out (transformers 5's lm_head); rotary_emb over rotary_pct of each head.
TEST(GPTNeoXArchitecture, KeysShapesAndClassNamesAreTheCheckpoints) {
  auto model = build_empty(test::tiny_gpt_neox_config());
  EXPECT_EQ(model->type_name(), "GPTNeoXForCausalLM");
  EXPECT_THAT(keys(*model), ElementsAreArray(gpt_neox_keys(true, true)));
  EXPECT_EQ(get_module_tensor_shape(*model, "gpt_neox.layers.0.attention.query_key_value.weight"), (Shape{96, 32}));
  EXPECT_EQ(get_module_tensor_shape(*model, "gpt_neox.layers.0.attention.query_key_value.bias"), (Shape{96}));
  EXPECT_EQ(get_module_tensor_shape(*model, "gpt_neox.layers.1.mlp.dense_h_to_4h.weight"), (Shape{48, 32}));
  EXPECT_EQ(get_module_tensor_shape(*model, "embed_out.weight"), (Shape{96, 32}));
  EXPECT_EQ(type_at(*model, "gpt_neox"), "GPTNeoXModel");
  EXPECT_EQ(type_at(*model, "gpt_neox.embed_in"), "Embedding");
  EXPECT_EQ(type_at(*model, "gpt_neox.emb_dropout"), "Dropout");
  EXPECT_EQ(type_at(*model, "gpt_neox.layers.1"), "GPTNeoXLayer");
  EXPECT_EQ(type_at(*model, "gpt_neox.layers.1.attention"), "GPTNeoXAttention");
  EXPECT_EQ(type_at(*model, "gpt_neox.layers.1.mlp"), "GPTNeoXMLP");
  EXPECT_EQ(type_at(*model, "gpt_neox.layers.1.post_mlp_dropout"), "Dropout");
  EXPECT_EQ(type_at(*model, "gpt_neox.final_layer_norm"), "LayerNorm");
  EXPECT_EQ(type_at(*model, "gpt_neox.rotary_emb"), "GPTNeoXRotaryEmbedding");
  EXPECT_EQ(type_at(*model, "embed_out"), "Linear");
  // rotary_pct 0.5 of head 8: 4 dims rotate, inv_freq [2] (and transformers' original_inv_freq copy).
  EXPECT_EQ(get_module_tensor_shape(*model, "gpt_neox.rotary_emb.inv_freq"), (Shape{2}));
  EXPECT_EQ(get_module_tensor_shape(*model, "gpt_neox.rotary_emb.original_inv_freq"), (Shape{2}));
  EXPECT_EQ(model->info().block_class, "GPTNeoXLayer");
  EXPECT_EQ(model->info().base_model_prefix, "gpt_neox");
  EXPECT_EQ(model->info().layers_prefix, "gpt_neox.layers");
  EXPECT_EQ(model->info().head_dim, 8);
  EXPECT_TRUE(nn::find_tied_parameters(*model).empty());

  // attention_bias false drops query_key_value's and dense's biases (the MLP keeps its own); a tied head is
  // embed_in's slot, listed under the embedding.
  nlohmann::json c = test::tiny_gpt_neox_config();
  c["attention_bias"] = false;
  c["tie_word_embeddings"] = true;
  auto tied = build_empty(c);
  EXPECT_THAT(keys(*tied), ElementsAreArray(gpt_neox_keys(false, true)));
  EXPECT_THAT(nn::find_tied_parameters(*tied),
              ElementsAre(ElementsAre("embed_out.weight", "gpt_neox.embed_in.weight")));
  EXPECT_EQ(tied->named_parameters().front().first, "gpt_neox.embed_in.weight");
  EXPECT_NE(tied->named_parameters().back().first, "embed_out.weight");
}

// Phi-3: transformers' Phi3ForCausalLM state_dict order (o_proj before the fused qkv_proj, as Phi3Attention
// registers them), qkv_proj's rows Hq·D + 2·Hkv·D, gate_up_proj's 2·I; rotary_emb over half of each head.
TEST(Phi3Architecture, KeysShapesAndClassNamesAreTransformers) {
  auto model = build_empty(test::tiny_phi3_config());
  EXPECT_EQ(model->type_name(), "Phi3ForCausalLM");
  std::vector<std::string> want = {"model.embed_tokens.weight"};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* n : {"self_attn.o_proj.weight", "self_attn.qkv_proj.weight", "mlp.gate_up_proj.weight",
                          "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"})
      want.push_back(p + n);
  }
  want.insert(want.end(), {"model.norm.weight", "lm_head.weight"});
  EXPECT_THAT(keys(*model), ElementsAreArray(want));
  // hidden 32, 4 query heads and 2 kv heads of 8: 32 + 2 · 16 rows; intermediate 48.
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.0.self_attn.qkv_proj.weight"), (Shape{64, 32}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.0.self_attn.o_proj.weight"), (Shape{32, 32}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.1.mlp.gate_up_proj.weight"), (Shape{96, 32}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.1.mlp.down_proj.weight"), (Shape{32, 48}));
  EXPECT_EQ(type_at(*model, "model"), "Phi3Model");
  EXPECT_EQ(type_at(*model, "model.layers.1"), "Phi3DecoderLayer");
  EXPECT_EQ(type_at(*model, "model.layers.1.self_attn"), "Phi3Attention");
  EXPECT_EQ(type_at(*model, "model.layers.1.mlp"), "Phi3MLP");
  EXPECT_EQ(type_at(*model, "model.layers.1.input_layernorm"), "Phi3RMSNorm");
  EXPECT_EQ(type_at(*model, "model.layers.1.resid_attn_dropout"), "Dropout");
  EXPECT_EQ(type_at(*model, "model.layers.1.resid_mlp_dropout"), "Dropout");
  EXPECT_EQ(type_at(*model, "model.norm"), "Phi3RMSNorm");
  EXPECT_EQ(type_at(*model, "model.rotary_emb"), "Phi3RotaryEmbedding");
  // partial_rotary_factor 0.5 of head 8: 4 dims rotate, inv_freq [2] and transformers' original_inv_freq copy.
  EXPECT_EQ(get_module_tensor_shape(*model, "model.rotary_emb.inv_freq"), (Shape{2}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.rotary_emb.original_inv_freq"), (Shape{2}));
  EXPECT_EQ(model->info().block_class, "Phi3DecoderLayer");
  EXPECT_EQ(model->info().num_key_value_heads, 2);
  EXPECT_EQ(model->info().head_dim, 8);
  EXPECT_TRUE(nn::find_tied_parameters(*model).empty());

  nlohmann::json c = test::tiny_phi3_config();
  c["tie_word_embeddings"] = true;
  auto tied = build_empty(c);
  EXPECT_THAT(nn::find_tied_parameters(*tied), ElementsAre(ElementsAre("lm_head.weight", "model.embed_tokens.weight")));
}

// OPT: transformers' OPTForCausalLM state_dict order (the decoder's final_layer_norm before its layers), positions
// table N + 2 rows, tied lm_head.
TEST(OPTArchitecture, KeysShapesAndClassNamesAreTransformers) {
  auto model = build_empty(test::tiny_opt_config());
  std::vector<std::string> want = {"model.decoder.embed_tokens.weight", "model.decoder.embed_positions.weight",
                                   "model.decoder.final_layer_norm.weight", "model.decoder.final_layer_norm.bias"};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.decoder.layers." + std::to_string(i) + ".";
    for (const char* n : {"k_proj", "v_proj", "q_proj", "out_proj"})
      for (const char* w : {".weight", ".bias"}) want.push_back(p + "self_attn." + n + w);
    for (const char* n : {"self_attn_layer_norm", "fc1", "fc2", "final_layer_norm"})
      for (const char* w : {".weight", ".bias"}) want.push_back(p + n + w);
  }
  want.push_back("lm_head.weight");
  EXPECT_THAT(keys(*model), ElementsAreArray(want));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.decoder.embed_positions.weight"), (Shape{66, 32}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.decoder.layers.0.fc1.weight"), (Shape{48, 32}));
  EXPECT_EQ(type_at(*model, "model"), "OPTModel");
  EXPECT_EQ(type_at(*model, "model.decoder"), "OPTDecoder");
  EXPECT_EQ(type_at(*model, "model.decoder.embed_positions"), "OPTLearnedPositionalEmbedding");
  EXPECT_EQ(type_at(*model, "model.decoder.layers.1"), "OPTDecoderLayer");
  EXPECT_EQ(type_at(*model, "model.decoder.layers.1.self_attn"), "OPTAttention");
  EXPECT_EQ(type_at(*model, "model.decoder.layers.1.final_layer_norm"), "LayerNorm");
  EXPECT_THAT(nn::find_tied_parameters(*model),
              ElementsAre(ElementsAre("lm_head.weight", "model.decoder.embed_tokens.weight")));
  EXPECT_EQ(model->info().block_class, "OPTDecoderLayer");
  EXPECT_EQ(model->info().base_model_prefix, "model");
  EXPECT_EQ(model->info().layers_prefix, "model.decoder.layers");

  // opt-350m's shape: no final norm, project_out before project_in; no biases and no norm parameters when asked.
  nlohmann::json c = test::tiny_opt_config();
  c["do_layer_norm_before"] = false;
  c["word_embed_proj_dim"] = 16;
  c["enable_bias"] = false;
  c["layer_norm_elementwise_affine"] = false;
  c["num_hidden_layers"] = 1;
  c["tie_word_embeddings"] = false;
  auto m350 = build_empty(c);
  EXPECT_THAT(keys(*m350),
              ElementsAre("model.decoder.embed_tokens.weight", "model.decoder.embed_positions.weight",
                          "model.decoder.project_out.weight", "model.decoder.project_in.weight",
                          "model.decoder.layers.0.self_attn.k_proj.weight",
                          "model.decoder.layers.0.self_attn.v_proj.weight",
                          "model.decoder.layers.0.self_attn.q_proj.weight",
                          "model.decoder.layers.0.self_attn.out_proj.weight", "model.decoder.layers.0.fc1.weight",
                          "model.decoder.layers.0.fc2.weight", "lm_head.weight"));
  EXPECT_EQ(get_module_tensor_shape(*m350, "model.decoder.embed_tokens.weight"), (Shape{96, 16}));
  EXPECT_EQ(get_module_tensor_shape(*m350, "model.decoder.project_in.weight"), (Shape{32, 16}));
  EXPECT_EQ(get_module_tensor_shape(*m350, "lm_head.weight"), (Shape{96, 16}));
  EXPECT_TRUE(nn::find_tied_parameters(*m350).empty());
}

TEST(EmptyBuild, ParametersAreMetaOfTheRequestedDtypeAndCountMatches) {
  auto model = build_empty(test::tiny_llama_config(), DType::BF16);
  int64_t count = 0;
  for (const auto& [name, t] : model->named_parameters()) {
    EXPECT_TRUE(t.is_meta()) << name;
    EXPECT_EQ(t.dtype(), DType::BF16) << name;
    count += t.numel();
  }
  // V·C embed + per layer (q 32·32 + k,v 2·16·32 + o 32·32 + 3·32·48 + 2·32) + norm + untied head.
  const int64_t per_layer = 32 * 32 + 2 * 16 * 32 + 32 * 32 + 3 * 32 * 48 + 2 * 32;
  EXPECT_EQ(count, 96 * 32 + 2 * per_layer + 32 + 96 * 32);
  // Computed buffers stay real (init_empty_weights leaves buffers alone), and in f32.
  const Tensor& inv_freq = nn::get_module_tensor(*model, "model.rotary_emb.inv_freq");
  EXPECT_FALSE(inv_freq.is_meta());
  EXPECT_EQ(inv_freq.dtype(), DType::F32);
}

TEST(CausalLMInfo, DescribesTheModelForPlanners) {
  auto model = build_empty(test::tiny_llama_config());
  const CausalLMInfo& info = model->info();
  EXPECT_EQ(info.architecture, "LlamaForCausalLM");
  EXPECT_EQ(info.model_type, "llama");
  EXPECT_EQ(info.num_hidden_layers(), 2);
  EXPECT_EQ(info.num_key_value_heads, 2);
  EXPECT_EQ(info.head_dim, 8);
  EXPECT_EQ(info.kv_cache_bytes_per_token(DType::F16), 2 * (2 * 2 * 8 * 2));  // two layers
  EXPECT_EQ(model->make_cache()->num_layers(), 2);
}

}  // namespace
}  // namespace ferry::models
