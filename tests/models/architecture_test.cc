// Each architecture's module tree: parameter names equal to the Hugging Face checkpoint keys (in transformers'
// order), shapes, class names (what no_split_module_classes match), ties, and an empty build that allocates nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ferry/core/error.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/bloom.h"
#include "ferry/models/gemma.h"
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

// Gemma 2 / Gemma 3: transformers' state_dict order (the four norms of a layer after its MLP; Gemma 3's q_norm and
// k_norm after o_proj), head_dim 8 ≠ hidden / heads, the scaled embedding's buffer and the RoPE tables: one for
// Gemma 2, one pair per layer type for Gemma 3, with its global table linearly scaled.
std::vector<std::string> gemma_keys(int layers, bool qk_norm) {
  std::vector<std::string> k = {"model.embed_tokens.weight"};
  for (int i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* n : {"q_proj", "k_proj", "v_proj", "o_proj"}) k.push_back(p + "self_attn." + n + ".weight");
    if (qk_norm) k.insert(k.end(), {p + "self_attn.q_norm.weight", p + "self_attn.k_norm.weight"});
    for (const char* n : {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "input_layernorm",
                          "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"})
      k.push_back(p + n + ".weight");
  }
  k.insert(k.end(), {"model.norm.weight", "lm_head.weight"});
  return k;
}

TEST(GemmaArchitecture, Gemma2KeysShapesAndClassNamesAreTransformers) {
  auto model = build_empty(test::tiny_gemma2_config());
  EXPECT_EQ(model->type_name(), "Gemma2ForCausalLM");
  EXPECT_THAT(keys(*model), ElementsAreArray(gemma_keys(3, false)));
  // 4 query heads and 2 kv heads of 8 over hidden 32; intermediate 48.
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.0.self_attn.q_proj.weight"), (Shape{32, 32}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.0.self_attn.k_proj.weight"), (Shape{16, 32}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.0.self_attn.o_proj.weight"), (Shape{32, 32}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.2.mlp.down_proj.weight"), (Shape{32, 48}));
  EXPECT_EQ(type_at(*model, "model"), "Gemma2Model");
  EXPECT_EQ(type_at(*model, "model.embed_tokens"), "Gemma2TextScaledWordEmbedding");
  EXPECT_EQ(type_at(*model, "model.layers.1"), "Gemma2DecoderLayer");
  EXPECT_EQ(type_at(*model, "model.layers.1.self_attn"), "Gemma2Attention");
  EXPECT_EQ(type_at(*model, "model.layers.1.mlp"), "Gemma2MLP");
  EXPECT_EQ(type_at(*model, "model.layers.1.pre_feedforward_layernorm"), "Gemma2RMSNorm");
  EXPECT_EQ(type_at(*model, "model.norm"), "Gemma2RMSNorm");
  EXPECT_EQ(type_at(*model, "model.rotary_emb"), "Gemma2RotaryEmbedding");
  EXPECT_EQ(get_module_tensor_shape(*model, "model.rotary_emb.inv_freq"), (Shape{4}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.rotary_emb.original_inv_freq"), (Shape{4}));
  // embed_scale: a non-persistent scalar buffer holding √32, as transformers registers it.
  const Tensor scale = nn::get_module_tensor(*model, "model.embed_tokens.embed_scale");
  EXPECT_EQ(scale.shape(), Shape{});
  EXPECT_FLOAT_EQ(scale.to_vector<float>()[0], std::sqrt(32.0f));
  EXPECT_EQ(model->info().block_class, "Gemma2DecoderLayer");
  EXPECT_EQ(model->info().head_dim, 8);
  // Gemma2Config ties the head by default.
  EXPECT_THAT(nn::find_tied_parameters(*model),
              ElementsAre(ElementsAre("lm_head.weight", "model.embed_tokens.weight")));
}

TEST(GemmaArchitecture, Gemma3KeysShapesAndClassNamesAreTransformers) {
  auto model = build_empty(test::tiny_gemma3_config());
  EXPECT_EQ(model->type_name(), "Gemma3ForCausalLM");
  EXPECT_THAT(keys(*model), ElementsAreArray(gemma_keys(3, true)));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.0.self_attn.q_norm.weight"), (Shape{8}));
  EXPECT_EQ(get_module_tensor_shape(*model, "model.layers.0.self_attn.k_norm.weight"), (Shape{8}));
  EXPECT_EQ(type_at(*model, "model"), "Gemma3TextModel");
  EXPECT_EQ(type_at(*model, "model.embed_tokens"), "Gemma3TextScaledWordEmbedding");
  EXPECT_EQ(type_at(*model, "model.layers.0"), "Gemma3DecoderLayer");
  EXPECT_EQ(type_at(*model, "model.layers.0.self_attn"), "Gemma3Attention");
  EXPECT_EQ(type_at(*model, "model.layers.0.self_attn.q_norm"), "Gemma3RMSNorm");
  EXPECT_EQ(type_at(*model, "model.layers.0.mlp"), "Gemma3MLP");
  EXPECT_EQ(type_at(*model, "model.rotary_emb"), "Gemma3RotaryEmbedding");
  // Buffers per layer type, sorted as transformers' sorted(set(layer_types)).
  std::vector<std::string> buffers;
  for (const auto& [name, t] : model->get_submodule("model.rotary_emb").named_buffers()) buffers.push_back(name);
  EXPECT_THAT(buffers, ElementsAre("full_attention_inv_freq", "full_attention_original_inv_freq",
                                   "sliding_attention_inv_freq", "sliding_attention_original_inv_freq"));
  // Global: 1 / (1e6^(2i/8) · 8) (linear factor 8); local: 1 / 1e4^(2i/8).
  const std::vector<float> global =
      nn::get_module_tensor(*model, "model.rotary_emb.full_attention_inv_freq").to_vector<float>();
  const std::vector<float> local =
      nn::get_module_tensor(*model, "model.rotary_emb.sliding_attention_inv_freq").to_vector<float>();
  ASSERT_EQ(global.size(), 4u);
  ASSERT_EQ(local.size(), 4u);
  EXPECT_FLOAT_EQ(global[0], 1.0f / 8);
  EXPECT_FLOAT_EQ(global[1], 1.0f / (std::pow(1e6f, 0.25f) * 8));
  EXPECT_FLOAT_EQ(local[1], 1.0f / std::pow(1e4f, 0.25f));
  EXPECT_EQ(model->info().block_class, "Gemma3DecoderLayer");
  EXPECT_TRUE(nn::find_tied_parameters(*model).empty());
  // bf16 weights: the normaliser as transformers casts it, √32 = 5.657 → 5.65625.
  auto bf16 = build_empty(test::tiny_gemma3_config(), DType::BF16);
  const auto& embed = dynamic_cast<const GemmaScaledWordEmbedding&>(bf16->get_submodule("model.embed_tokens"));
  EXPECT_EQ(embed.embed_scale(), 5.65625f);
  EXPECT_EQ(nn::get_module_tensor(*bf16, "model.embed_tokens.embed_scale").dtype(), DType::BF16);
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

// BLOOM: transformers' BloomForCausalLM state_dict order (word_embeddings_layernorm right after the embedding), biases
// on every Linear and LayerNorm, query_key_value 3C rows, a 4C-wide MLP, lm_head tied to word_embeddings.
TEST(BloomArchitecture, KeysShapesAndClassNamesAreTransformers) {
  auto model = build_empty(test::tiny_bloom_config());
  EXPECT_EQ(model->type_name(), "BloomForCausalLM");
  std::vector<std::string> want = {"transformer.word_embeddings.weight", "transformer.word_embeddings_layernorm.weight",
                                   "transformer.word_embeddings_layernorm.bias"};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    for (const char* n : {"input_layernorm", "self_attention.query_key_value", "self_attention.dense",
                          "post_attention_layernorm", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h"})
      for (const char* kind : {".weight", ".bias"}) want.push_back(p + n + kind);
  }
  want.insert(want.end(), {"transformer.ln_f.weight", "transformer.ln_f.bias", "lm_head.weight"});
  EXPECT_THAT(keys(*model), ElementsAreArray(want));
  // hidden 24 in 6 heads of 4; vocab 96.
  EXPECT_EQ(get_module_tensor_shape(*model, "transformer.h.0.self_attention.query_key_value.weight"), (Shape{72, 24}));
  EXPECT_EQ(get_module_tensor_shape(*model, "transformer.h.0.self_attention.query_key_value.bias"), (Shape{72}));
  EXPECT_EQ(get_module_tensor_shape(*model, "transformer.h.1.mlp.dense_h_to_4h.weight"), (Shape{96, 24}));
  EXPECT_EQ(get_module_tensor_shape(*model, "transformer.h.1.mlp.dense_4h_to_h.weight"), (Shape{24, 96}));
  EXPECT_EQ(get_module_tensor_shape(*model, "lm_head.weight"), (Shape{96, 24}));
  EXPECT_EQ(type_at(*model, "transformer"), "BloomModel");
  EXPECT_EQ(type_at(*model, "transformer.h.1"), "BloomBlock");
  EXPECT_EQ(type_at(*model, "transformer.h.1.self_attention"), "BloomAttention");
  EXPECT_EQ(type_at(*model, "transformer.h.1.self_attention.attention_dropout"), "Dropout");
  EXPECT_EQ(type_at(*model, "transformer.h.1.mlp"), "BloomMLP");
  EXPECT_EQ(type_at(*model, "transformer.word_embeddings_layernorm"), "LayerNorm");
  EXPECT_EQ(type_at(*model, "transformer.ln_f"), "LayerNorm");
  EXPECT_THAT(nn::find_tied_parameters(*model),
              ElementsAre(ElementsAre("lm_head.weight", "transformer.word_embeddings.weight")));
  const CausalLMInfo& info = model->info();
  EXPECT_EQ(info.block_class, "BloomBlock");
  EXPECT_EQ(info.base_model_prefix, "transformer");
  EXPECT_EQ(info.layers_prefix, "transformer.h");
  EXPECT_EQ(info.num_key_value_heads, 6);
  EXPECT_EQ(info.head_dim, 4);
  EXPECT_EQ(model->context_length(), INT64_MAX);  // ALiBi: no trained table of positions

  nlohmann::json c = test::tiny_bloom_config();
  c["tie_word_embeddings"] = false;
  EXPECT_TRUE(nn::find_tied_parameters(*build_empty(c)).empty());
}

// transformers 5.24's _get_alibi_slopes, printed by it: a power of two, and head counts that are not (the extra heads
// take odd powers of the next power of two's base: √2 apart for 12 heads).
TEST(BloomAlibi, SlopesAndBiasAreTransformers) {
  EXPECT_THAT(alibi_slopes(1), ElementsAre(0.00390625f));
  EXPECT_THAT(alibi_slopes(6), ElementsAre(0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f));
  EXPECT_THAT(alibi_slopes(8), ElementsAre(0.5f, 0.25f, 0.125f, 0.0625f, 0.03125f, 0.015625f, 0.0078125f, 0.00390625f));
  const std::vector<float> s12 = alibi_slopes(12);
  const std::vector<float> want12 = {0.5f,       0.25f,       0.125f,      0.0625f,     0.03125f,    0.015625f,
                                     0.0078125f, 0.00390625f, 0.70710677f, 0.35355338f, 0.17677669f, 0.088388338f};
  ASSERT_EQ(s12.size(), want12.size());
  for (std::size_t i = 0; i < s12.size(); ++i) EXPECT_FLOAT_EQ(s12[i], want12[i]) << i;
  EXPECT_EQ(alibi_slopes(112).size(), 112u);  // bigscience/bloom: 64 + 48
  EXPECT_THROW(alibi_slopes(0), Error);

  // bias[h, t, s] = slope_h · s for every query t.
  const Tensor bias = alibi_bias(alibi_slopes(6), 2, 3);
  EXPECT_EQ(bias.shape(), (Shape{6, 2, 3}));
  const std::vector<float> b = bias.to_vector<float>();
  EXPECT_THAT(std::vector<float>(b.begin(), b.begin() + 6), ElementsAre(0.0f, 0.25f, 0.5f, 0.0f, 0.25f, 0.5f));
  EXPECT_THAT(std::vector<float>(b.end() - 3, b.end()), ElementsAre(0.0f, 0.125f, 0.25f));
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
