// Forward passes of every architecture on random weights (no Python needed): prefilling a prompt in one forward
// equals feeding it token by token through the KV cache, logits_to_keep and position_ids behave as in
// transformers, and bad inputs are clear errors. Agreement with transformers itself is hf_reference_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "ferry/core/error.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/llama.h"
#include "ferry/nn/init.h"
#include "ferry/ops.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

using ::testing::HasSubstr;

struct Arch {
  std::string name;
  nlohmann::json config;
};

std::vector<Arch> architectures() {
  std::vector<Arch> out;
  for (auto& [name, config] : test::tiny_causal_configs()) out.push_back({name, config});
  return out;
}

std::shared_ptr<CausalLM> random_model(const nlohmann::json& config, DType dtype = DType::F32) {
  nn::manual_seed(42);
  return AutoModelForCausalLM::from_config(ConfigJson::from_json(config), dtype);
}

Tensor ids(std::vector<int64_t> v) { return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}); }

const std::vector<int64_t> kPrompt = {5, 17, 3, 88, 42, 42, 0, 95, 61, 7, 30};

class ForwardTest : public ::testing::TestWithParam<Arch> {};

TEST_P(ForwardTest, PrefillEqualsTokenByTokenDecode) {
  auto model = random_model(GetParam().config);
  const Tensor all = model->logits(ids(kPrompt));
  ASSERT_EQ(all.shape(), (Shape{11, 96}));
  auto cache = model->make_cache();
  double worst = 0;
  for (std::size_t t = 0; t < kPrompt.size(); ++t) {
    Tensor row = model->logits(ids({kPrompt[t]}), cache);
    ASSERT_EQ(row.shape(), (Shape{1, 96}));
    worst = std::max(worst, test::max_abs_diff(row, all.slice(t, t + 1)));
  }
  EXPECT_EQ(cache->seq_length(), 11);
  EXPECT_LE(worst, 1e-4) << "max |prefill - decode| = " << worst;
  // And a prefill of part of the prompt followed by decode steps.
  auto cache2 = model->make_cache();
  Tensor head = model->logits(ids({kPrompt.begin(), kPrompt.begin() + 6}), cache2);
  EXPECT_LE(test::max_abs_diff(head, all.slice(0, 6)), 1e-4);
  Tensor tail = model->logits(ids({kPrompt.begin() + 6, kPrompt.end()}), cache2);
  EXPECT_LE(test::max_abs_diff(tail, all.slice(6, 11)), 1e-4);
}

TEST_P(ForwardTest, LogitsToKeepAndBatchOfOne) {
  auto model = random_model(GetParam().config);
  const Tensor all = model->logits(ids(kPrompt));
  Tensor last = model->logits(ids(kPrompt), nullptr, 1);
  ASSERT_EQ(last.shape(), (Shape{1, 96}));
  // Not bit-identical: one row takes the GEMV path through lm_head, many rows the GEMM path.
  EXPECT_LE(test::max_abs_diff(last, all.slice(10, 11)), 1e-5);
  Tensor last3 = model->logits(ids(kPrompt), nullptr, 3);
  EXPECT_EQ(last3.shape(), (Shape{3, 96}));
  EXPECT_LE(test::max_abs_diff(last3, all.slice(8, 11)), 1e-5);
  Tensor batch = model->logits(ids(kPrompt).reshape({1, 11}));
  EXPECT_EQ(test::max_abs_diff(batch, all), 0.0);
}

TEST_P(ForwardTest, ExplicitPositionIdsMatchTheDefault) {
  auto model = random_model(GetParam().config);
  const Tensor all = model->logits(ids(kPrompt));
  std::vector<int64_t> pos(kPrompt.size());
  std::iota(pos.begin(), pos.end(), 0);
  nn::Value out = (*model)(nn::Args{ids(kPrompt)}.with("position_ids", ids(pos)));
  EXPECT_EQ(test::max_abs_diff(out.dict().at("logits").tensor(), all), 0.0);
  // BLOOM has no positions to move: ALiBi biases each key by its place in the cache, and position_ids are ignored,
  // as transformers' BloomModel does.
  if (GetParam().name == "bloom") return;
  // Positions matter: spreading the tokens apart changes their relative distances (a uniform shift would not
  // change RoPE models at all: rotary attention depends only on position differences).
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = 3 * static_cast<int64_t>(i);
  out = (*model)(nn::Args{ids(kPrompt)}.with("position_ids", ids(pos)));
  EXPECT_GT(test::max_abs_diff(out.dict().at("logits").tensor(), all), 1e-3);
}

TEST_P(ForwardTest, ForwardWithoutCacheReturnsTheOneItMade) {
  auto model = random_model(GetParam().config);
  nn::Value out = (*model)(nn::Args{ids(kPrompt)});
  std::shared_ptr<KvCache> cache = out.dict().at("past_key_values").object().get<KvCache>();
  EXPECT_EQ(cache->seq_length(), 11);
  EXPECT_EQ(cache->seq_length(1), 11);
  // Continuing with it equals a longer prefill.
  std::vector<int64_t> longer = kPrompt;
  longer.push_back(9);
  Tensor next = model->logits(ids({9}), cache);
  EXPECT_LE(test::max_abs_diff(next, model->logits(ids(longer), nullptr, 1)), 1e-4);
}

TEST_P(ForwardTest, HalfPrecisionWeightsStayCloseToF32) {
  auto model32 = random_model(GetParam().config, DType::F32);
  auto model16 = random_model(GetParam().config, DType::BF16);  // same draws, rounded to bf16
  const Tensor a = model32->logits(ids(kPrompt));
  const Tensor b = model16->logits(ids(kPrompt));
  EXPECT_LE(test::max_abs_diff(a, b) / std::max(1.0, test::max_abs(a)), 5e-2);
  EXPECT_GT(test::max_abs_diff(a, b), 0.0);  // really computed from other weights
}

TEST_P(ForwardTest, BadInputsAreErrors) {
  auto model = random_model(GetParam().config);
  auto expect_error = [&](nn::Args args, const std::string& text) {
    try {
      (*model)(std::move(args));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(text));
    }
  };
  expect_error(nn::Args{Tensor::zeros({3}, DType::F32)}, "input_ids must be i64");
  expect_error(nn::Args{Tensor::zeros({2, 3}, DType::I64)}, "KvCacheBatch");
  expect_error(nn::Args{Tensor::zeros({0}, DType::I64)}, "input_ids is empty");
  expect_error(nn::Args{}, "forward needs input_ids");
  expect_error(nn::Args{ids({1, 2})}.with("position_ids", ids({0})), "position_ids");
  expect_error(nn::Args{ids({1, 2})}.with("past_key_values", cache_value(std::make_shared<KvCache>(5))),
               "the KvCache has 5 layers");
  expect_error(nn::Args{ids({1, 2})}.with("past_key_values", 7), "past_key_values\" must be a KvCache");
  expect_error(nn::Args{ids({1, 2})}.with("logits_to_keep", -1), "logits_to_keep");
  EXPECT_THROW(model->logits(ids({96})), Error);  // outside the vocabulary
}

INSTANTIATE_TEST_SUITE_P(Architectures, ForwardTest, ::testing::ValuesIn(architectures()),
                         [](const auto& info) { return info.param.name; });

TEST(GPT2Forward, ContextBeyondNPositionsIsAnError) {
  nlohmann::json c = test::tiny_gpt2_config();
  c["n_positions"] = 8;
  auto model = random_model(c);
  auto cache = model->make_cache();
  model->logits(ids({1, 2, 3, 4, 5, 6, 7}), cache);
  model->logits(ids({8}), cache);
  try {
    model->logits(ids({9}), cache);
    FAIL() << "position 8 accepted with n_positions = 8";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("exceeds n_positions = 8"), HasSubstr("GPT2Model")));
  }
}

TEST(SlidingWindowForward, WindowChangesLogitsOnlyBeyondIt) {
  // The same weights with and without a window: identical while the context fits the window, different after.
  nlohmann::json windowed = test::tiny_mistral_config();  // sliding_window 3
  nlohmann::json full = windowed;
  full["sliding_window"] = nullptr;
  const Tensor a = random_model(windowed)->logits(ids(kPrompt));
  const Tensor b = random_model(full)->logits(ids(kPrompt));
  EXPECT_EQ(test::max_abs_diff(a.slice(0, 3), b.slice(0, 3)), 0.0);
  EXPECT_GT(test::max_abs_diff(a.slice(3, 11), b.slice(3, 11)), 1e-3);
}

// The decoder layer takes any feed-forward module (LlamaConfig::feed_forward), under the name the family gives it:
// a dense MLP renamed computes what the default one does; another module is really the one that runs.
class NoFeedForward : public nn::Module {
 public:
  std::string type_name() const override { return "NoFeedForward"; }
  nn::Value forward(const nn::Args& args) override { return ops::scale(args[0].tensor(), 0.0f); }
};

TEST(LlamaFeedForward, TheDecoderLayerTakesAnyFeedForwardModule) {
  const ConfigJson json = ConfigJson::from_json(test::tiny_llama_config());
  LlamaConfig c = LlamaConfig::from_json(json, kLlamaVariant);
  nn::manual_seed(42);
  const Tensor dense = LlamaForCausalLM(c, DType::F32).logits(ids(kPrompt));
  c.feed_forward_name = "block_sparse_moe";
  c.feed_forward = [&c](int64_t, DType d) { return std::make_shared<LlamaMLP>(c, d); };
  nn::manual_seed(42);
  LlamaForCausalLM renamed(c, DType::F32);
  EXPECT_EQ(test::max_abs_diff(renamed.logits(ids(kPrompt)), dense), 0.0);
  std::set<std::string> names;
  for (const auto& [name, t] : renamed.state_dict()) names.insert(name);
  EXPECT_TRUE(names.count("model.layers.1.block_sparse_moe.up_proj.weight"));
  EXPECT_FALSE(names.count("model.layers.1.mlp.up_proj.weight"));
  c.feed_forward = [](int64_t, DType) { return std::make_shared<NoFeedForward>(); };
  nn::manual_seed(42);
  EXPECT_GT(test::max_abs_diff(LlamaForCausalLM(c, DType::F32).logits(ids(kPrompt)), dense), 1e-3);
}

}  // namespace
}  // namespace ferry::models
