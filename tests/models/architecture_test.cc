// Each architecture's module tree: parameter names equal to the Hugging Face checkpoint keys (in transformers'
// order), shapes, class names (what no_split_module_classes match), ties, and an empty build that allocates nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "ferry/core/error.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/gpt2.h"
#include "ferry/models/gptj.h"
#include "ferry/models/llama.h"
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
