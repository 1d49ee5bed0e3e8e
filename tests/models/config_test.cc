// config.json parsing: typed getters and their errors, required keys, aliases, dtype keys, the three RoPE
// spellings, architecture resolution, and each family's defaults (transformers' values) and validation.
#include "ferry/models/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/bloom.h"
#include "ferry/models/gemma.h"
#include "ferry/models/gpt2.h"
#include "ferry/models/gpt_neox.h"
#include "ferry/models/gptj.h"
#include "ferry/models/llama.h"
#include "ferry/models/opt.h"
#include "ferry/models/phi3.h"
#include "support/error_of.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;

ConfigJson cfg(const json& j) { return ConfigJson::from_json(j, "test/config.json"); }

using test::error_of;

TEST(ConfigJson, TypedGettersUseDefaultsForAbsentAndNullKeys) {
  ConfigJson c = cfg({{"a", 3}, {"b", 1e-5}, {"c", true}, {"d", "silu"}, {"n", nullptr}});
  EXPECT_EQ(c.get_int("a", 7), 3);
  EXPECT_EQ(c.get_int("missing", 7), 7);
  EXPECT_EQ(c.get_int("n", 7), 7);
  EXPECT_DOUBLE_EQ(c.get_float("b", 0), 1e-5);
  EXPECT_DOUBLE_EQ(c.get_float("a", 0), 3.0);  // an integer is a fine float
  EXPECT_TRUE(c.get_bool("c", false));
  EXPECT_EQ(c.get_string("d", ""), "silu");
  EXPECT_FALSE(c.has("n"));
  EXPECT_FALSE(c.get_optional_int("n").has_value());
  EXPECT_EQ(c.get_optional_int("a"), 3);
}

TEST(ConfigJson, WrongTypesAreErrorsNamingKeyAndValue) {
  ConfigJson c = cfg({{"hidden_size", "64"}, {"eps", true}, {"flag", 1}, {"frac", 64.5}, {"name", 3}});
  EXPECT_THAT(error_of([&] { c.get_int("hidden_size", 0); }),
              AllOf(HasSubstr("test/config.json"), HasSubstr("\"hidden_size\" must be an integer"), HasSubstr("\"64\"")));
  EXPECT_THAT(error_of([&] { c.get_float("eps", 0); }), HasSubstr("\"eps\" must be a number"));
  EXPECT_THAT(error_of([&] { c.get_bool("flag", false); }), HasSubstr("\"flag\" must be true or false"));
  EXPECT_THAT(error_of([&] { c.get_int("frac", 0); }), HasSubstr("64.5"));
  EXPECT_THAT(error_of([&] { c.get_string("name", ""); }), HasSubstr("\"name\" must be a string"));
}

TEST(ConfigJson, MissingRequiredKeyNamesKeyAndArchitecture) {
  ConfigJson c = cfg({{"architectures", {"LlamaForCausalLM"}}});
  EXPECT_THAT(error_of([&] { c.require_int("hidden_size"); }),
              AllOf(HasSubstr("missing required key \"hidden_size\""), HasSubstr("LlamaForCausalLM"),
                    HasSubstr("test/config.json")));
}

TEST(ConfigJson, AliasesFollowAttributeMap) {
  ConfigJson c = cfg({{"hidden_size", 48}});
  EXPECT_FALSE(c.has("n_embd"));
  c.set_aliases({{"n_embd", "hidden_size"}});
  EXPECT_EQ(c.require_int("n_embd"), 48);
}

TEST(ConfigJson, ReadsFolderOrFileAndReportsBadFiles) {
  test::TempDir dir;
  EXPECT_THAT(error_of([&] { ConfigJson::read(dir.path()); }),
              AllOf(HasSubstr("cannot open config.json"), HasSubstr(dir.path().string())));
  EXPECT_EQ(test::error_kind_of([&] { ConfigJson::read(dir.path()); }), ErrorKind::NotFound);
  EXPECT_EQ(test::error_kind_of([&] { ConfigJson::read(dir.path() / "nope"); }), ErrorKind::NotFound);
  std::ofstream(dir.path() / "config.json") << "{\"vocab_size\": 5,";
  EXPECT_THAT(error_of([&] { ConfigJson::read(dir.path()); }), HasSubstr("not valid JSON"));
  EXPECT_EQ(test::error_kind_of([&] { ConfigJson::read(dir.path()); }), ErrorKind::InvalidValue);  // corrupt
  std::ofstream(dir.path() / "config.json") << "[1, 2]";
  EXPECT_THAT(error_of([&] { ConfigJson::read(dir.path()); }), HasSubstr("must be a JSON object, got a list"));
  std::ofstream(dir.path() / "config.json") << "{\"vocab_size\": 5}";
  EXPECT_EQ(ConfigJson::read(dir.path()).get_int("vocab_size", 0), 5);
  EXPECT_EQ(ConfigJson::read(dir.path() / "config.json").get_int("vocab_size", 0), 5);
}

TEST(ConfigJson, DtypeFromEitherKey) {
  EXPECT_EQ(cfg({{"dtype", "bfloat16"}}).dtype(), DType::BF16);          // transformers >= 5
  EXPECT_EQ(cfg({{"torch_dtype", "float16"}}).dtype(), DType::F16);      // before
  EXPECT_EQ(cfg({{"torch_dtype", "auto"}}).dtype(), std::nullopt);
  EXPECT_EQ(cfg(json::object()).dtype(), std::nullopt);
  EXPECT_THAT(error_of([] { cfg({{"torch_dtype", "float128"}}).dtype(); }), HasSubstr("torch_dtype"));
  EXPECT_EQ(resolve_dtype(cfg(json::object()), std::nullopt), DType::F32);
  EXPECT_EQ(resolve_dtype(cfg({{"dtype", "float16"}}), std::nullopt), DType::F16);
  EXPECT_EQ(resolve_dtype(cfg({{"dtype", "float16"}}), DType::BF16), DType::BF16);
  EXPECT_THROW(resolve_dtype(cfg(json::object()), DType::I64), Error);
}

TEST(ConfigJson, RopeParametersInAllThreeSpellings) {
  // transformers >= 5
  nn::RopeParameters p = cfg({{"rope_parameters", {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0},
                                                   {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                                                   {"original_max_position_embeddings", 8192}}}})
                             .rope_parameters(131072);
  EXPECT_EQ(p.rope_type, "llama3");
  EXPECT_DOUBLE_EQ(p.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(p.factor, 8.0);
  EXPECT_EQ(p.original_max_position_embeddings, 8192);
  // transformers 4: top-level rope_theta + rope_scaling with "rope_type"
  p = cfg({{"rope_theta", 1e6}, {"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}}).rope_parameters(4096);
  EXPECT_EQ(p.rope_type, "linear");
  EXPECT_DOUBLE_EQ(p.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(p.factor, 2.0);
  // the oldest: "type"
  p = cfg({{"rope_scaling", {{"type", "linear"}, {"factor", 3.0}}}}).rope_parameters(4096);
  EXPECT_EQ(p.rope_type, "linear");
  EXPECT_DOUBLE_EQ(p.rope_theta, 10000.0);
  // nothing: default type, default theta; llama3's original length defaults to max_position_embeddings
  p = cfg(json::object()).rope_parameters(2048);
  EXPECT_EQ(p.rope_type, "default");
  EXPECT_EQ(p.original_max_position_embeddings, 2048);
  p = cfg({{"rope_scaling", nullptr}, {"rope_theta", 500.0}}).rope_parameters(2048);
  EXPECT_DOUBLE_EQ(p.rope_theta, 500.0);
}

TEST(ConfigJson, MalformedRopeParametersAreErrors) {
  EXPECT_THAT(error_of([] { cfg({{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}}}).rope_parameters(64); }),
              HasSubstr("needs \"low_freq_factor\""));
  EXPECT_THAT(error_of([] { cfg({{"rope_parameters", {{"rope_type", "linear"}}}}).rope_parameters(64); }),
              HasSubstr("needs \"factor\""));
  EXPECT_THAT(error_of([] { cfg({{"rope_scaling", "linear"}}).rope_parameters(64); }), HasSubstr("must be an object"));
  EXPECT_THAT(error_of([] { cfg({{"rope_parameters", {{"factor", "8"}}}}).rope_parameters(64); }),
              HasSubstr("\"factor\" must be a number"));
  EXPECT_THAT(error_of([] {
                cfg({{"rope_parameters", {{"full_attention", {{"rope_type", "default"}}}}}}).rope_parameters(64);
              }),
              HasSubstr("per layer type"));
}

TEST(ResolveArchitecture, ArchitecturesFirstThenModelType) {
  EXPECT_EQ(resolve_architecture(cfg({{"architectures", {"MistralForCausalLM"}}, {"model_type", "mistral"}})),
            "MistralForCausalLM");
  EXPECT_EQ(resolve_architecture(cfg({{"model_type", "gpt2"}})), "GPT2LMHeadModel");
  // transformers' AutoModelForCausalLM goes by model_type, so a base-model class name still loads.
  EXPECT_EQ(resolve_architecture(cfg({{"architectures", {"LlamaModel"}}, {"model_type", "llama"}})), "LlamaForCausalLM");
  EXPECT_THAT(supported_architectures(),
              ElementsAre("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                          "MixtralForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "BloomForCausalLM",
                          "GPT2LMHeadModel", "GPTJForCausalLM", "GPTNeoXForCausalLM", "OPTForCausalLM",
                          "Phi3ForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM",
                          "Gemma3ForConditionalGeneration"));
  EXPECT_EQ(resolve_architecture(cfg({{"model_type", "qwen3"}})), "Qwen3ForCausalLM");
  EXPECT_EQ(resolve_architecture(cfg({{"model_type", "phi3"}})), "Phi3ForCausalLM");
  EXPECT_EQ(resolve_architecture(cfg({{"model_type", "gemma2"}})), "Gemma2ForCausalLM");
  EXPECT_EQ(resolve_architecture(cfg({{"model_type", "gemma3_text"}})), "Gemma3ForCausalLM");
  EXPECT_EQ(resolve_architecture(cfg({{"model_type", "gemma3"}})), "Gemma3ForConditionalGeneration");
}

TEST(ResolveArchitecture, UnknownArchitectureNamesBothKeysAndListsSupported) {
  const std::string e = error_of([] { resolve_architecture(cfg({{"architectures", {"BertModel"}}, {"model_type", "bert"}})); });
  EXPECT_THAT(e, AllOf(HasSubstr("unknown architecture"), HasSubstr("\"BertModel\""), HasSubstr("\"bert\""),
                       HasSubstr("LlamaForCausalLM"), HasSubstr("GPTJForCausalLM")));
  EXPECT_THAT(error_of([] { resolve_architecture(cfg(json::object())); }), HasSubstr("(absent)"));
  EXPECT_THAT(error_of([] { resolve_architecture(cfg({{"architectures", "LlamaForCausalLM"}})); }),
              HasSubstr("must be a list"));
}

// ---- families ---------------------------------------------------------------------------------------------------

json llama_sizes() {
  return {{"vocab_size", 100}, {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 3},
          {"num_attention_heads", 8}};
}

TEST(LlamaConfig, TransformersDefaults) {
  LlamaConfig c = LlamaConfig::from_json(cfg(llama_sizes()), kLlamaVariant);
  EXPECT_EQ(c.num_key_value_heads, 8);  // = num_attention_heads
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.qkv_bias || c.o_proj_bias || c.mlp_bias);
  EXPECT_EQ(c.rope.rope_type, "default");
  EXPECT_THAT(c.sliding_window, ElementsAre(0, 0, 0));
  EXPECT_EQ(c.class_prefix, "Llama");
}

TEST(LlamaConfig, BiasesFollowTheFamily) {
  json j = llama_sizes();
  j["attention_bias"] = true;
  j["mlp_bias"] = true;
  LlamaConfig llama = LlamaConfig::from_json(cfg(j), kLlamaVariant);
  EXPECT_TRUE(llama.qkv_bias && llama.o_proj_bias && llama.mlp_bias);
  // Mistral has no bias keys: transformers ignores them.
  LlamaConfig mistral = LlamaConfig::from_json(cfg(j), kMistralVariant);
  EXPECT_FALSE(mistral.qkv_bias || mistral.o_proj_bias || mistral.mlp_bias);
  // Qwen2: q/k/v always biased, o_proj never.
  json q = llama_sizes();
  q["num_key_value_heads"] = 2;  // Qwen2Config's default when absent is 32
  LlamaConfig qwen2 = LlamaConfig::from_json(cfg(q), kQwen2Variant);
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.o_proj_bias || qwen2.mlp_bias);
}

TEST(LlamaConfig, MistralDefaultsAndSlidingWindow) {
  LlamaConfig c = LlamaConfig::from_json(cfg(llama_sizes()), kMistralVariant);
  EXPECT_EQ(c.num_key_value_heads, 8);  // MistralConfig's default (8) when the key is absent
  EXPECT_THAT(c.sliding_window, ElementsAre(4096, 4096, 4096));  // default 4096
  json j = llama_sizes();
  j["sliding_window"] = nullptr;
  j["num_key_value_heads"] = nullptr;
  c = LlamaConfig::from_json(cfg(j), kMistralVariant);
  EXPECT_THAT(c.sliding_window, ElementsAre(0, 0, 0));
  EXPECT_EQ(c.num_key_value_heads, 8);  // null -> num_attention_heads (also 8 here)
  j["sliding_window"] = 16;
  j["num_key_value_heads"] = 2;
  c = LlamaConfig::from_json(cfg(j), kMistralVariant);
  EXPECT_THAT(c.sliding_window, ElementsAre(16, 16, 16));
  EXPECT_EQ(c.num_key_value_heads, 2);
}

TEST(LlamaConfig, Qwen2SlidingWindowLayers) {
  json j = llama_sizes();
  j["num_key_value_heads"] = 4;
  j["sliding_window"] = 32;
  EXPECT_THAT(LlamaConfig::from_json(cfg(j), kQwen2Variant).sliding_window, ElementsAre(0, 0, 0));
  j["use_sliding_window"] = true;
  j["max_window_layers"] = 1;
  EXPECT_THAT(LlamaConfig::from_json(cfg(j), kQwen2Variant).sliding_window, ElementsAre(0, 32, 32));
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
  EXPECT_THAT(LlamaConfig::from_json(cfg(j), kQwen2Variant).sliding_window, ElementsAre(32, 0, 32));
  j["layer_types"] = {"sliding_attention"};
  EXPECT_THAT(error_of([&] { LlamaConfig::from_json(cfg(j), kQwen2Variant); }),
              HasSubstr("one type per layer (3)"));
  j["layer_types"] = {"sliding_attention", "chunked", "full_attention"};
  EXPECT_THAT(error_of([&] { LlamaConfig::from_json(cfg(j), kQwen2Variant); }), HasSubstr("layer_types\"[1]"));
}

TEST(LlamaConfig, InvalidShapesAreErrors) {
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"}) {
    json j = llama_sizes();
    j.erase(key);
    EXPECT_THAT(error_of([&] { LlamaConfig::from_json(cfg(j), kLlamaVariant); }),
                HasSubstr(std::string("missing required key \"") + key + "\""));
    j[key] = 0;
    EXPECT_THAT(error_of([&] { LlamaConfig::from_json(cfg(j), kLlamaVariant); }), HasSubstr("must be positive"));
  }
  json j = llama_sizes();
  j["num_key_value_heads"] = 3;
  EXPECT_THAT(error_of([&] { LlamaConfig::from_json(cfg(j), kLlamaVariant); }),
              HasSubstr("must be a multiple of num_key_value_heads (3)"));
  j = llama_sizes();
  j["hidden_act"] = "gelu";
  EXPECT_THAT(error_of([&] { LlamaConfig::from_json(cfg(j), kLlamaVariant); }), HasSubstr("hidden_act \"gelu\""));
  j = llama_sizes();
  j["head_dim"] = 7;
  EXPECT_THAT(error_of([&] { LlamaConfig::from_json(cfg(j), kLlamaVariant); }), HasSubstr("must be even"));
}

TEST(GPT2Config, DefaultsAndAliases) {
  GPT2Config c = GPT2Config::from_json(cfg({{"vocab_size", 50}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 4}}));
  EXPECT_EQ(c.n_positions, 1024);
  EXPECT_EQ(c.n_inner, 128);
  EXPECT_EQ(c.activation_function, "gelu_new");
  EXPECT_DOUBLE_EQ(c.layer_norm_epsilon, 1e-5);
  EXPECT_TRUE(c.tie_word_embeddings);
  // transformers' attribute_map names
  c = GPT2Config::from_json(cfg({{"vocab_size", 50}, {"hidden_size", 32}, {"num_hidden_layers", 2},
                                 {"num_attention_heads", 4}, {"max_position_embeddings", 16}}));
  EXPECT_EQ(c.n_embd, 32);
  EXPECT_EQ(c.n_positions, 16);
  EXPECT_THAT(error_of([] { GPT2Config::from_json(cfg({{"vocab_size", 50}, {"n_embd", 30}, {"n_layer", 2}, {"n_head", 4}})); }),
              HasSubstr("multiple of n_head"));
  EXPECT_THAT(error_of([] {
                GPT2Config::from_json(cfg({{"vocab_size", 50}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 4},
                                           {"activation_function", "mish"}}));
              }),
              HasSubstr("activation \"mish\""));
  EXPECT_THAT(error_of([] { GPT2Config::from_json(cfg({{"vocab_size", 50}, {"n_layer", 2}, {"n_head", 4}})); }),
              HasSubstr("missing required key \"n_embd\""));
}

TEST(GPTJConfig, RotaryDimDefaultsAndLimits) {
  json j = {{"vocab_size", 50}, {"n_embd", 256}, {"n_layer", 2}, {"n_head", 2}};
  GPTJConfig c = GPTJConfig::from_json(cfg(j));
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_EQ(c.n_positions, 2048);
  EXPECT_FALSE(c.tie_word_embeddings);
  j["rotary_dim"] = nullptr;
  EXPECT_EQ(GPTJConfig::from_json(cfg(j)).rotary_dim, 128);  // the whole head
  j["rotary_dim"] = 130;
  EXPECT_THAT(error_of([&] { GPTJConfig::from_json(cfg(j)); }), HasSubstr("rotary_dim 130"));
  j["rotary_dim"] = 7;
  EXPECT_THAT(error_of([&] { GPTJConfig::from_json(cfg(j)); }), HasSubstr("must be even"));
}

json gpt_neox_sizes() {
  return {{"vocab_size", 50},
          {"hidden_size", 64},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"intermediate_size", 128}};
}

json with_keys(json base, const json& extra) {
  base.update(extra);
  return base;
}

// Values as transformers 5.24's GPTNeoXConfig reads the same keys (checked with it: rope_parameters after
// convert_rope_params_to_dict, GPTNeoXAttention.rotary_ndims).
TEST(GPTNeoXConfig, DefaultsAndTheRotaryKeysAsTransformersReadsThem) {
  GPTNeoXConfig c = GPTNeoXConfig::from_json(cfg(gpt_neox_sizes()));
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-5);
  EXPECT_TRUE(c.use_parallel_residual);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope.rope_type, "default");
  EXPECT_DOUBLE_EQ(c.rope.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.rotary_ndims, 4);  // head 16

  // Pythia's keys: rotary_pct and rotary_emb_base.
  c = GPTNeoXConfig::from_json(cfg(with_keys(gpt_neox_sizes(), {{"rotary_pct", 0.5}, {"rotary_emb_base", 500}})));
  EXPECT_EQ(c.rotary_ndims, 8);
  EXPECT_DOUBLE_EQ(c.rope.rope_theta, 500.0);
  // Top-level rope_theta and partial_rotary_factor are not this family's keys: transformers ignores them too.
  c = GPTNeoXConfig::from_json(
      cfg(with_keys(gpt_neox_sizes(), {{"rope_theta", 500.0}, {"partial_rotary_factor", 0.5}})));
  EXPECT_DOUBLE_EQ(c.rope.rope_theta, 10000.0);
  EXPECT_EQ(c.rotary_ndims, 4);
  // int(16 · 0.3) = 4
  EXPECT_EQ(GPTNeoXConfig::from_json(cfg(with_keys(gpt_neox_sizes(), {{"rotary_pct", 0.3}}))).rotary_ndims, 4);

  // transformers 5's rope_parameters win over rotary_pct / rotary_emb_base, which fill what they lack.
  c = GPTNeoXConfig::from_json(cfg(
      with_keys(gpt_neox_sizes(), {{"rotary_pct", 0.5},
                                   {"rotary_emb_base", 500},
                                   {"rope_parameters", {{"rope_type", "default"}, {"partial_rotary_factor", 1.0}}}})));
  EXPECT_EQ(c.rotary_ndims, 16);
  EXPECT_DOUBLE_EQ(c.rope.rope_theta, 500.0);
  c = GPTNeoXConfig::from_json(
      cfg(with_keys(gpt_neox_sizes(),
                    {{"rotary_pct", 0.5}, {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 100}}}})));
  EXPECT_EQ(c.rotary_ndims, 8);
  EXPECT_DOUBLE_EQ(c.rope.rope_theta, 100.0);
  // The legacy rope_scaling, "type" and all, wins over rope_parameters.
  c = GPTNeoXConfig::from_json(
      cfg(with_keys(gpt_neox_sizes(), {{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}},
                                       {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 100}}}})));
  EXPECT_EQ(c.rope.rope_type, "linear");
  EXPECT_DOUBLE_EQ(c.rope.factor, 2.0);
  EXPECT_DOUBLE_EQ(c.rope.rope_theta, 10000.0);
  EXPECT_EQ(c.rotary_ndims, 4);
  // GPT-NeoX-20B's activation
  EXPECT_EQ(GPTNeoXConfig::from_json(cfg(with_keys(gpt_neox_sizes(), {{"hidden_act", "gelu_fast"}}))).hidden_act,
            "gelu_fast");
}

TEST(GPTNeoXConfig, BadKeysAreErrorsNamingThem) {
  const auto error = [](const json& extra) {
    return error_of([&] { GPTNeoXConfig::from_json(cfg(with_keys(gpt_neox_sizes(), extra))); });
  };
  for (const char* key :
       {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"}) {
    json j = gpt_neox_sizes();
    j.erase(key);
    EXPECT_THAT(error_of([&] { GPTNeoXConfig::from_json(cfg(j)); }),
                HasSubstr(std::string("missing required key \"") + key + "\""));
    EXPECT_THAT(error({{key, 0}}), HasSubstr(std::string("\"") + key + "\" must be positive"));
  }
  EXPECT_THAT(error({{"hidden_size", 66}}), HasSubstr("must be a multiple of num_attention_heads (4)"));
  EXPECT_THAT(error({{"hidden_act", "quick_gelu"}}),
              AllOf(HasSubstr("hidden_act \"quick_gelu\" is not supported"), HasSubstr("gelu_fast")));
  // int(16 · 0.3125) = 5: odd
  EXPECT_THAT(error({{"rotary_pct", 0.3125}}),
              AllOf(HasSubstr("rotary_pct = 0.3125"), HasSubstr("rotates 5 dims"), HasSubstr("must be even")));
  EXPECT_THAT(error({{"rotary_pct", 0.0}}), HasSubstr("rotary_pct"));
  EXPECT_THAT(error({{"rope_parameters", {{"partial_rotary_factor", 1.5}}}}),
              HasSubstr("rope_parameters.partial_rotary_factor = 1.5"));
  EXPECT_THAT(error({{"rope_parameters", {{"rope_type", "dynamic"}, {"factor", 2.0}}}}),
              AllOf(HasSubstr("rope_parameters"), HasSubstr("\"dynamic\" is not supported")));
  EXPECT_THAT(error({{"rope_scaling", {{"type", "linear"}}}}), HasSubstr("\"rope_scaling\" of type \"linear\" needs"));
  EXPECT_THAT(error({{"rope_parameters", "linear"}}), HasSubstr("\"rope_parameters\" must be an object"));
  EXPECT_THAT(error({{"use_parallel_residual", "yes"}}), HasSubstr("use_parallel_residual"));
}

json opt_sizes() {
  return {
      {"vocab_size", 50}, {"hidden_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"ffn_dim", 128}};
}

TEST(OPTConfig, DefaultsAndBadKeys) {
  OPTConfig c = OPTConfig::from_json(cfg(opt_sizes()));
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.word_embed_proj_dim, 64);  // = hidden_size
  EXPECT_TRUE(c.do_layer_norm_before);
  EXPECT_FALSE(c.remove_final_layer_norm);
  EXPECT_TRUE(c.enable_bias);
  EXPECT_TRUE(c.layer_norm_elementwise_affine);
  EXPECT_EQ(c.activation_function, "relu");
  EXPECT_TRUE(c.tie_word_embeddings);
  c = OPTConfig::from_json(
      cfg(with_keys(opt_sizes(), {{"word_embed_proj_dim", nullptr}, {"_remove_final_layer_norm", true}})));
  EXPECT_EQ(c.word_embed_proj_dim, 64);
  EXPECT_TRUE(c.remove_final_layer_norm);

  const auto error = [](const json& extra) {
    return error_of([&] { OPTConfig::from_json(cfg(with_keys(opt_sizes(), extra))); });
  };
  for (const char* key : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "ffn_dim"}) {
    json j = opt_sizes();
    j.erase(key);
    EXPECT_THAT(error_of([&] { OPTConfig::from_json(cfg(j)); }),
                HasSubstr(std::string("missing required key \"") + key + "\""));
    EXPECT_THAT(error({{key, -1}}), HasSubstr(std::string("\"") + key + "\" must be positive"));
  }
  EXPECT_THAT(error({{"word_embed_proj_dim", 0}}), HasSubstr("\"word_embed_proj_dim\" must be positive"));
  EXPECT_THAT(error({{"hidden_size", 66}}), HasSubstr("must be a multiple of num_attention_heads (4)"));
  EXPECT_THAT(error({{"activation_function", "quick_gelu"}}),
              HasSubstr("activation_function \"quick_gelu\" is not supported"));
  EXPECT_THAT(error({{"do_layer_norm_before", 1}}), HasSubstr("do_layer_norm_before"));
}

// Values as transformers 5.24's BloomConfig reads the same keys (checked with it): attribute_map's
// num_hidden_layers / num_attention_heads win over n_layer / n_head, and n_embed over hidden_size.
TEST(BloomConfig, DefaultsAliasesAndBadKeys) {
  const json sizes = {{"vocab_size", 50}, {"hidden_size", 64}, {"n_layer", 2}, {"n_head", 8}};
  BloomConfig c = BloomConfig::from_json(cfg(sizes));
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 8);
  EXPECT_EQ(c.head_dim(), 8);
  EXPECT_DOUBLE_EQ(c.layer_norm_epsilon, 1e-5);
  EXPECT_FALSE(c.apply_residual_connection_post_layernorm);
  EXPECT_EQ(c.pretraining_tp, 1);
  EXPECT_FALSE(c.slow_but_exact);
  EXPECT_TRUE(c.tie_word_embeddings);
  // bigscience/bloom's spelling: n_embed and num_attention_heads.
  c = BloomConfig::from_json(cfg({{"vocab_size", 50},
                                  {"n_embed", 48},
                                  {"n_layer", 3},
                                  {"num_attention_heads", 6},
                                  {"layer_norm_epsilon", 1e-3},
                                  {"apply_residual_connection_post_layernorm", true},
                                  {"pretraining_tp", 4},
                                  {"tie_word_embeddings", false}}));
  EXPECT_EQ(c.hidden_size, 48);
  EXPECT_EQ(c.n_layer, 3);
  EXPECT_EQ(c.n_head, 6);
  EXPECT_DOUBLE_EQ(c.layer_norm_epsilon, 1e-3);
  EXPECT_TRUE(c.apply_residual_connection_post_layernorm);
  EXPECT_EQ(c.pretraining_tp, 4);
  EXPECT_FALSE(c.tie_word_embeddings);
  // Both spellings: BloomConfig(hidden_size=40, n_embed=48, n_head=4, num_attention_heads=6, n_layer=2,
  // num_hidden_layers=3) has hidden_size 48, n_head 6, n_layer 3.
  c = BloomConfig::from_json(cfg({{"vocab_size", 50},
                                  {"hidden_size", 40},
                                  {"n_embed", 48},
                                  {"n_head", 4},
                                  {"num_attention_heads", 6},
                                  {"n_layer", 2},
                                  {"num_hidden_layers", 3}}));
  EXPECT_EQ(c.hidden_size, 48);
  EXPECT_EQ(c.n_head, 6);
  EXPECT_EQ(c.n_layer, 3);

  const auto error = [&](const json& extra) {
    return error_of([&] { BloomConfig::from_json(cfg(with_keys(sizes, extra))); });
  };
  for (const char* key : {"vocab_size", "hidden_size", "n_layer", "n_head"}) {
    json j = sizes;
    j.erase(key);
    EXPECT_THAT(error_of([&] { BloomConfig::from_json(cfg(j)); }), HasSubstr("missing required key")) << key;
  }
  EXPECT_THAT(error({{"vocab_size", 0}}), HasSubstr("\"vocab_size\" must be positive"));
  EXPECT_THAT(error({{"n_head", -2}}), HasSubstr("\"n_head\" must be positive"));
  EXPECT_THAT(error({{"n_layer", 0}}), HasSubstr("\"n_layer\" must be positive"));
  EXPECT_THAT(error({{"hidden_size", 60}}), HasSubstr("must be a multiple of n_head (8)"));
  EXPECT_THAT(error({{"layer_norm_epsilon", -1.0}}), HasSubstr("layer_norm_epsilon"));
  EXPECT_THAT(error({{"pretraining_tp", 0}}), HasSubstr("\"pretraining_tp\" must be ≥ 1"));
  EXPECT_THAT(error({{"n_embed", "big"}}), HasSubstr("\"n_embed\" must be an integer"));
  EXPECT_THAT(error({{"apply_residual_connection_post_layernorm", 1}}),
              HasSubstr("apply_residual_connection_post_layernorm"));
  // The registry builds it from either key.
  EXPECT_EQ(resolve_architecture(cfg({{"model_type", "bloom"}})), "BloomForCausalLM");
}

json phi3_sizes() {
  return {{"vocab_size", 50},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4}};
}

json longrope(json extra = json::object()) {
  json r = {{"rope_type", "longrope"},
            {"short_factor", {1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7}},
            {"long_factor", {2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0}}};
  r.update(extra);
  return r;
}

// Values as transformers 5.24's Phi3Config and Phi3RotaryEmbedding read the same keys (checked with it:
// rope_parameters after convert_rope_params_to_dict, rotary_emb.attention_scaling).
TEST(Phi3Config, DefaultsAndTheRopeKeysAsTransformersReadsThem) {
  Phi3Config c = Phi3Config::from_json(cfg(phi3_sizes()));
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.rope_type, "default");
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rotary_ndims, 16);
  EXPECT_DOUBLE_EQ(c.attention_scaling, 1.0);

  // Phi-3-mini-4k's sliding_window; the top-level partial_rotary_factor and rope_theta (Phi-4-mini's form).
  c = Phi3Config::from_json(cfg(
      with_keys(phi3_sizes(), {{"sliding_window", 2047}, {"partial_rotary_factor", 0.75}, {"rope_theta", 250000.0}})));
  EXPECT_EQ(c.sliding_window, 2047);
  EXPECT_EQ(c.rotary_ndims, 12);
  EXPECT_DOUBLE_EQ(c.rope_theta, 250000.0);
  // The rope dict's own keys win over the top-level ones; head_dim, when given, is the head.
  c = Phi3Config::from_json(cfg(
      with_keys(phi3_sizes(), {{"partial_rotary_factor", 0.75},
                               {"head_dim", 24},
                               {"rope_theta", 1.0},
                               {"rope_parameters",
                                {{"rope_type", "default"}, {"rope_theta", 500.0}, {"partial_rotary_factor", 0.5}}}})));
  EXPECT_EQ(c.rotary_ndims, 12);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500.0);

  // longrope: the top-level original_max_position_embeddings (default 4096) over the dict's; the attention factor
  // from max_position_embeddings / original: √(1 + ln 8 / ln 8).
  c = Phi3Config::from_json(
      cfg(with_keys(phi3_sizes(), {{"max_position_embeddings", 64},
                                   {"original_max_position_embeddings", 8},
                                   {"rope_parameters", longrope({{"original_max_position_embeddings", 32}})}})));
  EXPECT_EQ(c.rope_type, "longrope");
  EXPECT_EQ(c.original_max_position_embeddings, 8);
  EXPECT_THAT(c.long_factor, ElementsAre(2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0));
  EXPECT_DOUBLE_EQ(c.attention_scaling, std::sqrt(2.0));
  c = Phi3Config::from_json(cfg(with_keys(phi3_sizes(), {{"rope_parameters", longrope()}})));
  EXPECT_EQ(c.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.attention_scaling, 1.0);  // 4096 / 4096
  // factor 3 over original 16: transformers' attention_scaling 1.1816262629022296.
  c = Phi3Config::from_json(cfg(with_keys(phi3_sizes(), {{"original_max_position_embeddings", 16},
                                                         {"rope_parameters", longrope({{"factor", 3.0}})}})));
  EXPECT_NEAR(c.attention_scaling, 1.1816262629022296, 1e-15);
  c = Phi3Config::from_json(
      cfg(with_keys(phi3_sizes(), {{"rope_parameters", longrope({{"attention_factor", 1.25}})}})));
  EXPECT_DOUBLE_EQ(c.attention_scaling, 1.25);
  // The legacy "su" (and "yarn") in rope_scaling, which wins over rope_parameters: longrope with the dict's
  // original_max_position_embeddings (transformers renames the type after standardising).
  json su = longrope({{"original_max_position_embeddings", 16}});
  su.erase("rope_type");
  su["type"] = "su";
  c = Phi3Config::from_json(cfg(with_keys(phi3_sizes(), {{"max_position_embeddings", 64},
                                                         {"rope_scaling", su},
                                                         {"rope_parameters", {{"rope_type", "default"}}}})));
  EXPECT_EQ(c.rope_type, "longrope");
  EXPECT_EQ(c.original_max_position_embeddings, 16);
  EXPECT_DOUBLE_EQ(c.attention_scaling, std::sqrt(1.0 + std::log(4.0) / std::log(16.0)));
}

// The rotary embedding gives the short factors' frequencies up to original_max_position_embeddings and the long
// factors' beyond, as transformers' longrope_frequency_update; inv_freq = 1 / (factor · θ^(2i/R)).
TEST(Phi3Config, RotaryEmbeddingPicksShortOrLongFactorsByTheLongestContext) {
  const Phi3Config c = Phi3Config::from_json(
      cfg(with_keys(phi3_sizes(), {{"original_max_position_embeddings", 32}, {"rope_parameters", longrope()}})));
  const std::vector<float> plain = phi3_inverse_frequencies(c, {}).to_vector<float>();
  const std::vector<float> short_freq = phi3_inverse_frequencies(c, c.short_factor).to_vector<float>();
  const std::vector<float> long_freq = phi3_inverse_frequencies(c, c.long_factor).to_vector<float>();
  ASSERT_EQ(plain.size(), 8u);
  for (std::size_t i = 0; i < plain.size(); ++i) {
    EXPECT_NEAR(short_freq[i], plain[i] / c.short_factor[i], 1e-6 * plain[i]) << i;
    EXPECT_NEAR(long_freq[i], plain[i] / c.long_factor[i], 1e-6 * plain[i]) << i;
  }
  Phi3RotaryEmbedding rotary(c);
  const auto at = [&](std::vector<int64_t> positions) {
    const Tensor p = Tensor::from_vector(positions, {static_cast<int64_t>(positions.size())});
    return rotary(nn::Args{}.with("position_ids", p)).tensor().to_vector<float>();
  };
  EXPECT_EQ(at({0, 1, 2}), short_freq);
  EXPECT_EQ(at({31}), short_freq);
  EXPECT_EQ(at({32}), long_freq);  // a context of 33
  EXPECT_EQ(at({0, 40, 3}), long_freq);
  EXPECT_EQ(rotary.buffer("original_inv_freq").to_vector<float>(), short_freq);
  EXPECT_THAT(error_of([&] { rotary(nn::Args{}); }), HasSubstr("position_ids"));
}

TEST(Phi3Config, BadKeysAreErrorsNamingThem) {
  const auto error = [](const json& extra) {
    return error_of([&] { Phi3Config::from_json(cfg(with_keys(phi3_sizes(), extra))); });
  };
  for (const char* key :
       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"}) {
    json j = phi3_sizes();
    j.erase(key);
    EXPECT_THAT(error_of([&] { Phi3Config::from_json(cfg(j)); }),
                HasSubstr(std::string("missing required key \"") + key + "\""));
    EXPECT_THAT(error({{key, 0}}), HasSubstr(std::string("\"") + key + "\" must be positive"));
  }
  EXPECT_THAT(error({{"num_key_value_heads", 3}}), HasSubstr("must be a multiple of num_key_value_heads (3)"));
  EXPECT_THAT(error({{"head_dim", -8}}), HasSubstr("\"head_dim\" must be positive"));
  EXPECT_THAT(error({{"sliding_window", 0}}), HasSubstr("\"sliding_window\" must be positive"));
  EXPECT_THAT(error({{"sliding_window", "yes"}}), HasSubstr("sliding_window"));
  EXPECT_THAT(error({{"hidden_act", "quick_gelu"}}), HasSubstr("hidden_act \"quick_gelu\" is not supported"));
  // int(16 · 0.3125) = 5: odd
  EXPECT_THAT(error({{"partial_rotary_factor", 0.3125}}),
              AllOf(HasSubstr("partial_rotary_factor = 0.3125"), HasSubstr("rotates 5 dims"), HasSubstr("even")));
  EXPECT_THAT(error({{"rope_parameters", {{"partial_rotary_factor", 1.5}}}}),
              HasSubstr("rope_parameters.partial_rotary_factor = 1.5"));
  EXPECT_THAT(error({{"rope_parameters", {{"rope_type", "linear"}, {"factor", 2.0}}}}),
              AllOf(HasSubstr("rope type \"linear\" is not supported"), HasSubstr("rope_parameters")));
  EXPECT_THAT(error({{"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}}}),
              AllOf(HasSubstr("rope type \"dynamic\""), HasSubstr("rope_scaling")));
  EXPECT_THAT(error({{"rope_parameters", "longrope"}}), HasSubstr("\"rope_parameters\" must be an object"));
  EXPECT_THAT(error({{"rope_theta", -1.0}}), HasSubstr("rope_theta"));
  // longrope's factor lists: present, numbers, one per rotated pair, positive.
  json no_long = longrope();
  no_long.erase("long_factor");
  EXPECT_THAT(error({{"rope_parameters", no_long}}), HasSubstr("\"rope_parameters.long_factor\" is missing"));
  EXPECT_THAT(error({{"rope_parameters", longrope({{"short_factor", {1.0, 2.0}}})}}),
              AllOf(HasSubstr("rope_parameters.short_factor\" has 2 entries"), HasSubstr("(8 = rotary dims / 2)")));
  EXPECT_THAT(error({{"partial_rotary_factor", 0.5}, {"rope_parameters", longrope()}}),
              HasSubstr("short_factor\" has 8 entries; it needs one per rotated pair (4"));
  EXPECT_THAT(error({{"rope_parameters", longrope({{"long_factor", {1, 1, 1, 1, 1, 1, 1, "x"}}})}}),
              HasSubstr("\"rope_parameters.long_factor\" must hold positive numbers, got \"x\""));
  EXPECT_THAT(error({{"rope_parameters", longrope({{"long_factor", {1, 1, 1, 1, 1, 1, 1, 0}}})}}),
              HasSubstr("long_factor\" must hold positive numbers, got 0"));
  EXPECT_THAT(error({{"rope_parameters", longrope({{"short_factor", 1.0}})}}),
              HasSubstr("\"rope_parameters.short_factor\" must be a list of numbers"));
  EXPECT_THAT(error({{"original_max_position_embeddings", 0}, {"rope_parameters", longrope()}}),
              HasSubstr("\"original_max_position_embeddings\" must be positive"));
  EXPECT_THAT(error({{"rope_parameters", longrope({{"attention_factor", -1.0}})}}),
              HasSubstr("rope_parameters.attention_factor must be a number"));
  json su = longrope();
  su["rope_type"] = "su";
  EXPECT_THAT(error({{"rope_scaling", su}}),
              HasSubstr("\"rope_scaling\" of type \"su\" needs \"original_max_position_embeddings\""));
}

json gemma_sizes(int layers = 4) {
  return {{"vocab_size", 256},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"num_hidden_layers", layers},
          {"num_attention_heads", 4}};
}

// Values as transformers 5.24's Gemma2Config reads the same keys (checked with it).
TEST(GemmaConfig, Gemma2DefaultsAsTransformers) {
  const GemmaConfig c = GemmaConfig::gemma2_from_json(cfg(gemma_sizes()));
  EXPECT_EQ(c.architecture, "Gemma2ForCausalLM");
  // Absent sizes are transformers' class defaults (released Gemma 3 configs leave most of them out).
  const GemmaConfig d2 = GemmaConfig::gemma2_from_json(cfg(json::object()));
  EXPECT_EQ(d2.vocab_size, 256000);
  EXPECT_EQ(d2.hidden_size, 2304);
  EXPECT_EQ(d2.intermediate_size, 9216);
  EXPECT_EQ(d2.num_hidden_layers, 26);
  EXPECT_EQ(d2.num_attention_heads, 8);
  EXPECT_EQ(GemmaConfig::gemma3_from_json(cfg(json::object())).vocab_size, 262208);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 256);  // not hidden / heads
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_EQ(c.hidden_activation, "gelu_pytorch_tanh");
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_DOUBLE_EQ(c.query_pre_attn_scalar, 256);
  EXPECT_DOUBLE_EQ(c.attn_logit_softcapping, 50);
  EXPECT_DOUBLE_EQ(c.final_logit_softcapping, 30);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_THAT(c.sliding_layers, ElementsAre(true, false, true, false));  // layer_types: every other, from layer 0
  EXPECT_EQ(c.rope_global.rope_type, "default");
  EXPECT_DOUBLE_EQ(c.rope_global.rope_theta, 10000);
  EXPECT_DOUBLE_EQ(c.rope_local.rope_theta, 10000);

  // null turns the soft-capping and the window off; hidden_act (in released configs) is not what the MLP reads.
  const GemmaConfig off = GemmaConfig::gemma2_from_json(
      cfg(with_keys(gemma_sizes(),
                    {{"attn_logit_softcapping", nullptr},
                     {"final_logit_softcapping", nullptr},
                     {"sliding_window", nullptr},
                     {"hidden_act", "relu"},
                     {"hidden_activation", "gelu"},
                     {"layer_types", {"full_attention", "sliding_attention", "sliding_attention", "full_attention"}},
                     {"rope_parameters", {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 500.0}}}})));
  EXPECT_EQ(off.attn_logit_softcapping, 0);
  EXPECT_EQ(off.final_logit_softcapping, 0);
  EXPECT_EQ(off.sliding_window, 0);
  EXPECT_EQ(off.hidden_activation, "gelu");
  EXPECT_THAT(off.sliding_layers, ElementsAre(false, true, true, false));
  EXPECT_EQ(off.rope_global.rope_type, "linear");
  EXPECT_DOUBLE_EQ(off.rope_local.factor, 2.0);
  EXPECT_DOUBLE_EQ(off.rope_local.rope_theta, 500.0);
}

// Gemma3TextConfig: sliding_window_pattern (default 6), 131072 positions, no soft-capping, and RoPE per layer type
// from each spelling transformers accepts (checked with it): the Hub's legacy rope_theta / rope_local_base_freq /
// rope_scaling, the nested rope_parameters that save_pretrained writes, and the defaults 1e6 (global) / 1e4 (local).
TEST(GemmaConfig, Gemma3DefaultsAndRopePerLayerType) {
  const GemmaConfig c = GemmaConfig::gemma3_from_json(cfg(gemma_sizes(7)));
  EXPECT_EQ(c.architecture, "Gemma3ForCausalLM");
  EXPECT_EQ(c.base_model_class, "Gemma3TextModel");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.attn_logit_softcapping, 0);
  EXPECT_EQ(c.final_logit_softcapping, 0);
  EXPECT_THAT(c.sliding_layers, ElementsAre(true, true, true, true, true, false, true));
  EXPECT_EQ(c.rope_global.rope_type, "default");
  EXPECT_DOUBLE_EQ(c.rope_global.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rope_local.rope_theta, 1e4);

  const GemmaConfig legacy = GemmaConfig::gemma3_from_json(
      cfg(with_keys(gemma_sizes(4), {{"rope_theta", 5e5},
                                     {"rope_local_base_freq", 2e3},
                                     {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}},
                                     {"sliding_window_pattern", 2},
                                     {"final_logit_softcapping", 12.5}})));
  EXPECT_THAT(legacy.sliding_layers, ElementsAre(true, false, true, false));
  EXPECT_EQ(legacy.rope_global.rope_type, "linear");
  EXPECT_DOUBLE_EQ(legacy.rope_global.factor, 8.0);
  EXPECT_DOUBLE_EQ(legacy.rope_global.rope_theta, 5e5);
  EXPECT_EQ(legacy.rope_local.rope_type, "default");
  EXPECT_DOUBLE_EQ(legacy.rope_local.rope_theta, 2e3);
  EXPECT_DOUBLE_EQ(legacy.final_logit_softcapping, 12.5);

  const GemmaConfig nested = GemmaConfig::gemma3_from_json(
      cfg(with_keys(gemma_sizes(4),
                    {{"rope_parameters",
                      {{"full_attention", {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 1000.0}}},
                       {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 50.0}}}}}})));
  EXPECT_DOUBLE_EQ(nested.rope_global.factor, 4.0);
  EXPECT_DOUBLE_EQ(nested.rope_global.rope_theta, 1000.0);
  EXPECT_DOUBLE_EQ(nested.rope_local.rope_theta, 50.0);
  // A type without rope_theta takes the top-level key, as Gemma3TextConfig's setdefault does.
  const GemmaConfig partial = GemmaConfig::gemma3_from_json(
      cfg(with_keys(gemma_sizes(4), {{"rope_local_base_freq", 123.0},
                                     {"rope_parameters", {{"full_attention", {{"rope_type", "default"}}}}}})));
  EXPECT_DOUBLE_EQ(partial.rope_global.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(partial.rope_local.rope_theta, 123.0);

  // attn_logit_softcapping: transformers' Gemma3Attention never applies it; ferry neither, and says so.
  ScopedLogCapture log(LogLevel::Warning);
  const GemmaConfig capped = GemmaConfig::gemma3_from_json(
      cfg(with_keys(gemma_sizes(), {{"attn_logit_softcapping", 50.0}})));
  EXPECT_EQ(capped.attn_logit_softcapping, 0);
  ASSERT_EQ(log.messages().size(), 1u);
  EXPECT_THAT(log.messages()[0], HasSubstr("Gemma 3 does not apply it"));
}

TEST(GemmaConfig, BadKeysAreErrorsNamingThem) {
  const auto error2 = [](const json& extra) {
    return error_of([&] { GemmaConfig::gemma2_from_json(cfg(with_keys(gemma_sizes(), extra))); });
  };
  const auto error3 = [](const json& extra) {
    return error_of([&] { GemmaConfig::gemma3_from_json(cfg(with_keys(gemma_sizes(), extra))); });
  };
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"})
    EXPECT_THAT(error3({{key, 0}}), HasSubstr(std::string("\"") + key + "\" must be positive"));
  EXPECT_THAT(error2({{"num_key_value_heads", 3}}), HasSubstr("must be a multiple of num_key_value_heads (3)"));
  EXPECT_THAT(error2({{"head_dim", 7}}), HasSubstr("head_dim 7 must be even"));
  EXPECT_THAT(error2({{"sliding_window", 0}}), HasSubstr("\"sliding_window\" must be positive"));
  EXPECT_THAT(error2({{"attn_logit_softcapping", 0.0}}),
              HasSubstr("\"attn_logit_softcapping\" must be a positive number or null"));
  EXPECT_THAT(error3({{"final_logit_softcapping", -30.0}}),
              HasSubstr("\"final_logit_softcapping\" must be a positive"));
  EXPECT_THAT(error2({{"query_pre_attn_scalar", 0}}), HasSubstr("\"query_pre_attn_scalar\" must be positive"));
  EXPECT_THAT(error2({{"hidden_activation", "quick_gelu"}}),
              HasSubstr("hidden_activation \"quick_gelu\" is not supported"));
  EXPECT_THAT(error3({{"use_bidirectional_attention", true}}),
              HasSubstr("use_bidirectional_attention is not supported"));
  EXPECT_THAT(error2({{"layer_types", {"sliding_attention"}}}), HasSubstr("one type per layer (4)"));
  EXPECT_THAT(error3({{"layer_types", {"sliding_attention", "global", "full_attention", "full_attention"}}}),
              HasSubstr("\"layer_types\"[1] must be \"full_attention\" or \"sliding_attention\", got \"global\""));
  EXPECT_THAT(error3({{"sliding_window_pattern", 0}}), HasSubstr("\"sliding_window_pattern\" must be positive"));
  // Gemma 3's RoPE comes per layer type; transformers silently ignores a flat dict, ferry says so.
  EXPECT_THAT(error3({{"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 100.0}}}}),
              AllOf(HasSubstr("\"rope_parameters\" must be given per layer type"), HasSubstr("separate RoPE")));
  EXPECT_THAT(error3({{"rope_parameters", {{"full_attention", "linear"}}}}),
              HasSubstr("\"rope_parameters.full_attention\" must be an object"));
  EXPECT_THAT(error3({{"rope_scaling", {{"rope_type", "linear"}}}}),
              AllOf(HasSubstr("rope_parameters.full_attention"), HasSubstr("needs \"factor\"")));
  EXPECT_THAT(error3({{"rope_parameters", {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", "x"}}}}}}),
              HasSubstr("rope_parameters.sliding_attention"));
  // Gemma 2 reads one RoPE setting; a per-type dict is ConfigJson's error.
  EXPECT_THAT(error2({{"rope_parameters", {{"full_attention", {{"rope_type", "default"}}}}}}),
              HasSubstr("given per layer type"));
}

}  // namespace
}  // namespace ferry::models
