// The architecture registry: every entry builds what it says (class, model_type, kind, block class, tied
// parameters), configs resolve to entries by architectures[0] then model_type, and GGUF architectures point back at
// entries that write them.
#include "ferry/models/architectures.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "ferry/nn/empty_weights.h"
#include "ferry/nn/tied.h"
#include "support/error_of.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

using ::testing::HasSubstr;

// A tiny config for each entry: the test support's family configs, renamed for family members that share one.
nlohmann::json config_for(const Architecture& a) {
  nlohmann::json c;
  if (a.encoder_decoder) {
    c = test::tiny_t5_config();
  } else {
    for (const auto& [type, config] : test::tiny_causal_configs())
      if (config.value("model_type", type) == a.model_type) c = config;
    // Gemma3ForConditionalGeneration (model_type gemma3): the language model's config nested, as on the Hub.
    if (c.is_null() && a.model_type == "gemma3") c = {{"text_config", test::tiny_gemma3_config()}};
  }
  EXPECT_FALSE(c.is_null()) << "no tiny config for " << a.name;
  c["architectures"] = {std::string(a.name)};
  c["model_type"] = std::string(a.model_type);
  return c;
}

bool tied(const nn::Module& m, std::string_view a, std::string_view b) {
  for (const auto& group : nn::find_tied_parameters(m))
    if (std::count(group.begin(), group.end(), std::string(a)) && std::count(group.begin(), group.end(), std::string(b)))
      return true;
  return false;
}

TEST(Registry, EveryEntryBuildsWhatItDeclares) {
  std::set<std::string_view> names;
  for (const Architecture& a : architectures()) {
    SCOPED_TRACE(std::string(a.name));
    EXPECT_TRUE(names.insert(a.name).second) << "listed twice";
    ASSERT_NE(a.build, nullptr);
    for (const bool tie : {false, true}) {
      nlohmann::json c = config_for(a);
      c["tie_word_embeddings"] = tie;
      std::shared_ptr<LanguageModel> m;
      {
        auto guard = nn::init_empty_weights();
        m = a.build(ConfigJson::from_json(c), DType::F32);
      }
      const LanguageModelInfo& info = m->model_info();
      EXPECT_EQ(info.architecture, a.name);
      EXPECT_EQ(info.model_type, a.model_type);
      EXPECT_EQ(info.is_encoder_decoder, a.encoder_decoder);
      EXPECT_EQ(info.block_class, a.no_split_module);
      EXPECT_FALSE(a.tied_keys.empty());
      for (const TiedKey& t : a.tied_keys)
        EXPECT_EQ(tied(*m, t.tied, t.source), t.always || tie) << t.tied << " / " << t.source << ", tie " << tie;
    }
    EXPECT_EQ(&architecture_for(ConfigJson::from_json(config_for(a))), &a);
  }
}

TEST(Registry, ConfigsResolveByClassThenModelTypeAndUnknownOnesListEveryFamily) {
  const auto cfg = [](nlohmann::json j) { return ConfigJson::from_json(std::move(j)); };
  EXPECT_EQ(architecture_for(cfg({{"architectures", {"LlamaModel"}}, {"model_type", "llama"}})).name, "LlamaForCausalLM");
  EXPECT_EQ(architecture_for(cfg({{"model_type", "umt5"}})).name, "UMT5ForConditionalGeneration");
  const std::string e = test::error_of([&] { architecture_for(cfg({{"model_type", "bert"}})); });
  for (const Architecture& a : architectures()) EXPECT_THAT(e, HasSubstr(std::string(a.name)));
  EXPECT_EQ(find_architecture("BertModel"), nullptr);
}

TEST(Registry, GgufArchitecturesLoadAsAnEntryThatWritesThem) {
  for (const auto& [name, experts] :
       {std::pair{"llama", false}, std::pair{"llama", true}, std::pair{"qwen2", false}, std::pair{"qwen3", false},
        std::pair{"qwen2moe", true}, std::pair{"qwen3moe", true}, std::pair{"gptneox", false}, std::pair{"phi3", false},
        std::pair{"bloom", false}}) {
    SCOPED_TRACE(std::string(name) + (experts ? " with experts" : ""));
    const GgufArchitecture* g = find_gguf_architecture(name, experts);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->experts, experts);
    ASSERT_NE(g, nullptr) << name;
    const Architecture* a = find_architecture(g->hf_architecture);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_EQ(a->gguf, g) << name;
    ASSERT_NE(g->tensors, nullptr);
    // Every HF name the table knows is a parameter of that architecture (untied: its head has a name of its own).
    nlohmann::json c = config_for(*a);
    c["tie_word_embeddings"] = false;
    std::shared_ptr<LanguageModel> m;
    {
      auto guard = nn::init_empty_weights();
      m = a->build(ConfigJson::from_json(c), DType::F32);
    }
    std::set<std::string> params;
    for (const auto& [p, t] : m->named_parameters()) params.insert(p);
    for (const auto& [gguf, hf] : g->tensors->globals) EXPECT_TRUE(params.count(std::string(hf))) << hf;
    for (const auto& [gguf, hf] : g->tensors->blocks)
      EXPECT_TRUE(params.count(std::string(g->tensors->hf_layers) + ".0." + std::string(hf) + ".weight")) << hf;
    for (const GgufStackedExperts& st : g->tensors->stacked_experts) {  // expert 0 of layer 0, both ways
      const std::string stacked = "blk.0." + std::string(st.gguf) + ".weight";
      const auto names = hf_expert_names(*g->tensors, stacked);
      ASSERT_TRUE(names);
      EXPECT_TRUE(params.count(names->first + "0" + names->second)) << st.gguf;
      EXPECT_EQ(gguf_expert_name(*g->tensors, names->first + "0" + names->second), (std::pair{stacked, int64_t{0}}));
    }
  }
}

}  // namespace
}  // namespace ferry::models
