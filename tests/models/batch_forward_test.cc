// Batched forwards (KvCacheBatch) for every architecture on random f32 weights: sequences of different lengths in
// one forward give the logits each gives alone (within 1e-5 of the largest logit), sequences may join and leave
// between steps without changing the others, logits_to_keep counts per sequence, and bad batches are errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/core/error.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/kv_cache.h"
#include "ferry/nn/init.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

using ::testing::HasSubstr;

struct Arch {
  std::string name;
  nlohmann::json config;
};

std::vector<Arch> architectures() {  // mistral's sliding window (3) makes the mask per sequence matter
  std::vector<Arch> out;
  for (auto& [name, config] : test::tiny_causal_configs()) out.push_back({name, config});
  return out;
}

std::shared_ptr<CausalLM> random_model(const nlohmann::json& config) {
  nn::manual_seed(42);
  return AutoModelForCausalLM::from_config(ConfigJson::from_json(config), DType::F32);
}

Tensor ids(const std::vector<int64_t>& v) { return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}); }

// One sequence run alone: its inputs step by step (a prompt, then one token per step) and the logits of each.
struct Alone {
  std::vector<std::vector<int64_t>> steps;
  std::vector<Tensor> logits;
};

Alone run_alone(CausalLM& model, std::vector<std::vector<int64_t>> steps) {
  Alone a{std::move(steps), {}};
  auto cache = model.make_cache();
  for (const auto& s : a.steps) a.logits.push_back(model.logits(ids(s), cache));
  return a;
}

// |a - b| relative to the largest |logit| of b.
double rel_diff(const Tensor& a, const Tensor& b) { return test::max_abs_diff(a, b) / std::max(1e-30, test::max_abs(b)); }

class BatchForwardTest : public ::testing::TestWithParam<Arch> {};

TEST_P(BatchForwardTest, SequencesOfDifferentLengthsEqualEachRunAlone) {
  auto model = random_model(GetParam().config);
  // Three sequences: prompts of 11, 4 and 1 tokens, then decode tokens; d joins at step 1, b leaves after it.
  std::vector<Alone> alone = {
      run_alone(*model, {{5, 17, 3, 88, 42, 42, 0, 95, 61, 7, 30}, {12}, {13}, {14}}),
      run_alone(*model, {{9, 8, 7, 6}, {21}}),
      run_alone(*model, {{77}, {31}, {32}, {33}}),
      run_alone(*model, {{4, 4, 4, 50, 51, 52, 53}, {60}, {61}}),
  };
  // Which sequences run in which batched step (by index into `alone`), and which of their steps.
  const std::vector<std::vector<std::pair<int, int>>> schedule = {
      {{0, 0}, {1, 0}, {2, 0}},
      {{0, 1}, {1, 1}, {2, 1}, {3, 0}},  // d's prompt joins the decode steps of a, b, c
      {{0, 2}, {2, 2}, {3, 1}},          // b left
      {{3, 2}, {2, 3}, {0, 3}},          // any order within a step
  };
  std::vector<std::shared_ptr<KvCache>> caches;
  for (std::size_t i = 0; i < alone.size(); ++i) caches.push_back(model->make_cache());
  double worst = 0;
  for (std::size_t st = 0; st < schedule.size(); ++st) {
    std::vector<int64_t> all;
    std::vector<KvCacheBatch::Sequence> seqs;
    for (auto [i, s] : schedule[st]) {
      const auto& in = alone[static_cast<std::size_t>(i)].steps[static_cast<std::size_t>(s)];
      all.insert(all.end(), in.begin(), in.end());
      seqs.push_back({caches[static_cast<std::size_t>(i)], static_cast<int64_t>(in.size())});
    }
    KvCacheBatch batch(seqs);
    Tensor logits = model->logits(ids(all), batch);
    ASSERT_EQ(logits.size(0), static_cast<int64_t>(all.size()));
    for (std::size_t j = 0; j < schedule[st].size(); ++j) {
      auto [i, s] = schedule[st][j];
      const Tensor& want = alone[static_cast<std::size_t>(i)].logits[static_cast<std::size_t>(s)];
      const Tensor got = logits.slice(batch.offset(static_cast<int64_t>(j)),
                                      batch.offset(static_cast<int64_t>(j)) + batch[static_cast<int64_t>(j)].tokens);
      const double d = rel_diff(got, want);
      worst = std::max(worst, d);
      EXPECT_LE(d, 1e-5) << "step " << st << " sequence " << i;
    }
  }
  for (std::size_t i = 0; i < alone.size(); ++i) {
    int64_t tokens = 0;
    for (const auto& s : alone[i].steps) tokens += static_cast<int64_t>(s.size());
    EXPECT_EQ(caches[i]->seq_length(), tokens) << i;
  }
  RecordProperty("worst_relative_diff", std::to_string(worst));
}

TEST_P(BatchForwardTest, LogitsToKeepCountsPerSequence) {
  auto model = random_model(GetParam().config);
  const std::vector<int64_t> a = {5, 17, 3, 88, 42}, b = {9}, c = {1, 2, 3};
  Tensor la = run_alone(*model, {a}).logits[0], lb = run_alone(*model, {b}).logits[0],
         lc = run_alone(*model, {c}).logits[0];
  std::vector<int64_t> all(a);
  all.insert(all.end(), b.begin(), b.end());
  all.insert(all.end(), c.begin(), c.end());
  for (int64_t keep : {1, 2}) {
    KvCacheBatch batch({{model->make_cache(), 5}, {model->make_cache(), 1}, {model->make_cache(), 3}});
    Tensor got = model->logits(ids(all), batch, keep);
    const int64_t ka = keep, kb = 1, kc = keep;  // b has one token only
    ASSERT_EQ(got.size(0), ka + kb + kc) << keep;
    EXPECT_LE(rel_diff(got.slice(0, ka), la.slice(5 - ka, 5)), 1e-5);
    EXPECT_LE(rel_diff(got.slice(ka, ka + kb), lb), 1e-5);
    EXPECT_LE(rel_diff(got.slice(ka + kb, ka + kb + kc), lc.slice(3 - kc, 3)), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, BatchForwardTest, ::testing::ValuesIn(architectures()),
                         [](const auto& info) { return info.param.name; });

TEST(KvCacheBatch, RefusesBadBatches) {
  auto model = random_model(test::tiny_llama_config());
  auto cache = model->make_cache();
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message([] { KvCacheBatch({}); }), HasSubstr("at least one sequence"));
  EXPECT_THAT(message([] { KvCacheBatch({{nullptr, 1}}); }), HasSubstr("has no cache"));
  EXPECT_THAT(message([&] { KvCacheBatch({{cache, 0}}); }), HasSubstr("at least one"));
  EXPECT_THAT(message([&] { KvCacheBatch({{cache, 1}, {cache, 2}}); }), HasSubstr("shares its cache"));
  // Rows of input_ids must match the batch.
  EXPECT_THAT(message([&] { model->logits(ids({1, 2, 3}), KvCacheBatch({{cache, 1}, {model->make_cache(), 1}})); }),
              HasSubstr("new tokens but input_ids has 3"));
  // A cache of another model (other number of layers).
  auto other = std::make_shared<KvCache>(5);
  EXPECT_THAT(message([&] { model->logits(ids({1, 2}), KvCacheBatch({{cache, 1}, {other, 1}})); }),
              HasSubstr("layers but the model has"));
  // Nothing was appended by the failed forwards.
  EXPECT_EQ(cache->seq_length(), 0);
}

TEST(KvCacheBatch, Gpt2RefusesASequencePastItsPositions) {
  auto model = random_model(test::tiny_gpt2_config());  // n_positions 64
  auto long_cache = model->make_cache();
  std::vector<int64_t> prompt(60, 3);
  model->logits(ids(prompt), long_cache);
  try {
    model->logits(ids({1, 2, 3, 4, 5, 6}), KvCacheBatch({{model->make_cache(), 1}, {long_cache, 5}}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("65 tokens exceeds n_positions = 64"));
  }
}

}  // namespace
}  // namespace ferry::models
