// Speculative sampling (sampling.h: speculative_sample; speculative.h: a draft that samples): every token it gives is
// distributed as the model's distribution, whatever the draft. Checked by Pearson's chi-square against the exact
// distribution, at a bound a correct rule exceeds with probability below 1e-6 (the draws are seeded, so each test is
// deterministic), and shown able to fail: the same check rejects the rules one gets wrong (keep every proposal; on a
// rejection draw from p instead of max(0, p - q)) and samples of another model.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>

#include "ferry/core/error.h"
#include "ferry/models/auto_model.h"
#include "ferry/nn/init.h"
#include "ferry/text/generate.h"
#include "ferry/text/sampling.h"
#include "support/hf_folder.h"

namespace ferry::text {
namespace {

// Pearson's statistic of `counts` against `expected` probabilities over n draws, cells expected below 5 draws merged
// into one. `dof` gets the degrees of freedom.
double chi_square(const std::vector<double>& counts, const std::vector<double>& expected, double n, int* dof) {
  double stat = 0, small_count = 0, small_expect = 0;
  int cells = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * n;
    if (e < 5) {
      small_count += counts[i];
      small_expect += e;
      continue;
    }
    stat += (counts[i] - e) * (counts[i] - e) / e;
    ++cells;
  }
  if (small_expect > 0) {
    stat += (small_count - small_expect) * (small_count - small_expect) / std::max(small_expect, 1e-9);
    ++cells;
  }
  *dof = std::max(cells - 1, 1);
  return stat;
}

// A bound the statistic of a correct sampler exceeds with probability < 1e-6 (normal approximation of chi-square
// with d degrees of freedom, mean d, sd sqrt(2d), taken 8 sd out plus a margin for its right skew at small d).
double bound(int dof) { return dof + 8 * std::sqrt(2.0 * dof) + 10; }

std::vector<double> normalised(std::vector<double> w) {
  const double s = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= s;
  return w;
}

enum class Rule { Right, KeepAll, ResampleFromP };

// n positions: the proposal drawn from q, then `rule` (Right: speculative_sample). Counts of the tokens given.
std::vector<double> run_rule(const std::vector<double>& p, const std::vector<double>& q, Rule rule, int n,
                             double* kept_fraction) {
  Rng rng(1234);
  std::vector<double> counts(p.size(), 0.0);
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    const TokenId x = sample_weights(q, rng);
    TokenId t = x;
    if (rule == Rule::Right) {
      const SpeculativeDraw d = speculative_sample(p, q, x, rng);
      t = d.token;
      kept += d.accepted;
    } else if (rule == Rule::ResampleFromP && !(rng.uniform() * q[x] < p[x])) {
      t = sample_weights(p, rng);
    }
    counts[static_cast<std::size_t>(t)] += 1;
  }
  if (kept_fraction) *kept_fraction = static_cast<double>(kept) / n;
  return counts;
}

TEST(SpeculativeSampling, RuleGivesTheModelsDistributionWhateverTheDraft) {
  const std::vector<double> p = normalised({0.30, 0.05, 0.20, 0, 0.25, 0.15, 0.05});
  const std::map<std::string, std::vector<double>> drafts{
      {"a draft near the model", normalised({0.25, 0.10, 0.20, 0.02, 0.20, 0.18, 0.05})},
      {"a draft far from it, with mass where the model has none", normalised({0.02, 0.40, 0.03, 0.30, 0.05, 0.1, 0.1})},
      {"a draft that is the model", p},
      {"a draft sure of one token (prompt lookup, a greedy draft)", {0, 0, 0, 0, 1, 0, 0}},
      {"a draft missing tokens the model has", normalised({0.5, 0, 0, 0.5, 0, 0, 0})},
  };
  const int n = 200000;
  for (const auto& [what, q] : drafts) {
    SCOPED_TRACE(what);
    double kept = 0;
    int dof = 0;
    const double stat = chi_square(run_rule(p, q, Rule::Right, n, &kept), p, n, &dof);
    EXPECT_LT(stat, bound(dof)) << "chi-square " << stat << " with " << dof << " degrees of freedom";
    // Kept with probability sum_x min(p(x), q(x)) = 1 - the total variation distance, within 6 standard errors.
    double overlap = 0;
    for (std::size_t i = 0; i < p.size(); ++i) overlap += std::min(p[i], q[i]);
    EXPECT_NEAR(kept, overlap, 6 * std::sqrt(overlap * (1 - overlap) / n) + 1e-12);
    // The check can fail: the wrong rules give another distribution (except where the draft is the model).
    if (what == "a draft that is the model") continue;
    EXPECT_GT(chi_square(run_rule(p, q, Rule::KeepAll, n, nullptr), p, n, &dof), bound(dof)) << "keep all";
    if (what == "a draft sure of one token (prompt lookup, a greedy draft)") continue;  // p without x: the residual
    EXPECT_GT(chi_square(run_rule(p, q, Rule::ResampleFromP, n, nullptr), p, n, &dof), bound(dof)) << "from p";
  }
}

TEST(SpeculativeSampling, RuleRefusesMismatchedDistributions) {
  Rng rng(1);
  const std::vector<double> p{0.5, 0.5}, q{1.0, 0, 0};
  EXPECT_THROW(speculative_sample(p, q, 0, rng), Error);
  EXPECT_THROW(speculative_sample(p, p, 2, rng), Error);
  EXPECT_THROW(speculative_sample(p, p, -1, rng), Error);
  EXPECT_THROW(sample_weights(std::vector<double>{0, 0}, rng), Error);
  EXPECT_THROW(sample_weights(std::vector<double>{0.5, -0.1}, rng), Error);
}

TEST(SpeculativeSampling, SamplerDistributionIsWhatItDrawsFrom) {
  const std::vector<float> logits{1.0f, 2.5f, -0.5f, 2.5f, 0.0f, 3.0f};
  const std::vector<TokenId> previous{5};
  SamplingOptions o{.do_sample = true, .temperature = 0.7f, .top_k = 4, .top_p = 0.95f, .repetition_penalty = 1.3f};
  Sampler sampler(o);
  std::vector<double> p;
  sampler.distribution(logits, previous, p);
  ASSERT_EQ(p.size(), logits.size());
  EXPECT_NEAR(std::accumulate(p.begin(), p.end(), 0.0), 1.0, 1e-12);
  EXPECT_EQ(p[2], 0.0);  // below the top 4
  const int n = 100000;
  std::vector<double> counts(p.size(), 0.0);
  for (int i = 0; i < n; ++i) counts[static_cast<std::size_t>(sampler.sample(logits, previous))] += 1;
  int dof = 0;
  EXPECT_LT(chi_square(counts, p, n, &dof), bound(dof));
  Sampler greedy({.repetition_penalty = 1.3f});
  greedy.distribution(logits, previous, p);
  EXPECT_EQ(p, (std::vector<double>{0, 1, 0, 0, 0, 0}));  // 3.0 / 1.3 < 2.5: the penalty moves the argmax
}

// End to end: the model and a draft of other weights, sampling at temperature 1 over the whole vocabulary. The
// second generated token is the first a speculative step decides; its distribution is sum over t1 of p(t1) p(t2 | t1),
// computed exactly from the model's logits.
TEST(SpeculativeSampling, GenerateWithASamplingDraftKeepsTheModelsDistribution) {
  test::TempDir dir, other;
  nn::manual_seed(31);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  nn::manual_seed(32);
  test::write_random_hf_folder(other.path(), test::tiny_llama_config());
  auto model = models::AutoModelForCausalLM::from_pretrained(dir.path());
  auto draft = models::AutoModelForCausalLM::from_pretrained(other.path());
  const std::vector<TokenId> prompt{5, 17, 23, 41};
  SamplingOptions s{.do_sample = true, .temperature = 0.25f, .top_k = 0};

  auto distribution_after = [&](models::LanguageModel& m, std::vector<TokenId> ids) {
    GenerateOptions o;
    o.stop.max_new_tokens = 1;
    o.record_logits = 1;
    const GenerateResult r = generate(m, nullptr, ids, o);
    std::vector<double> p;
    Sampler(s).distribution(r.step_logits.at(0), ids, p);
    return p;
  };
  auto second_token_law = [&](models::LanguageModel& m) {
    const std::vector<double> first = distribution_after(m, prompt);
    std::vector<double> law(first.size(), 0.0);
    for (std::size_t t = 0; t < first.size(); ++t) {
      if (first[t] < 1e-12) continue;
      std::vector<TokenId> ids = prompt;
      ids.push_back(static_cast<TokenId>(t));
      const std::vector<double> next = distribution_after(m, ids);
      for (std::size_t j = 0; j < law.size(); ++j) law[j] += first[t] * next[j];
    }
    return law;
  };
  const std::vector<double> law = second_token_law(*model);

  const int n = 3000;
  std::vector<double> counts(law.size(), 0.0), plain_draft(law.size(), 0.0);
  std::size_t proposed = 0, kept = 0;
  for (int seed = 0; seed < n; ++seed) {
    GenerateOptions o;
    o.stop.max_new_tokens = 3;  // the second token's step is counted when a third follows
    o.sampling = s;
    o.sampling.seed = static_cast<uint64_t>(seed);
    o.speculative.draft = draft.get();
    o.speculative.max_proposals = 2;
    o.speculative.draft_confidence = 0;
    const GenerateResult r = generate(*model, nullptr, prompt, o);
    ASSERT_EQ(r.generated_ids.size(), 3u);
    counts[static_cast<std::size_t>(r.generated_ids[1])] += 1;
    proposed += r.speculative.proposed;
    kept += r.speculative.accepted;
    GenerateOptions d;  // the draft's own samples: what the check must tell apart
    d.stop.max_new_tokens = 2;
    d.sampling = o.sampling;
    plain_draft[static_cast<std::size_t>(generate(*draft, nullptr, prompt, d).generated_ids[1])] += 1;
  }
  int dof = 0;
  const double stat = chi_square(counts, law, n, &dof);
  EXPECT_LT(stat, bound(dof)) << "chi-square " << stat << " with " << dof << " degrees of freedom";
  EXPECT_GT(chi_square(plain_draft, law, n, &dof), bound(dof)) << "the check tells the draft's samples apart";
  EXPECT_GT(proposed, 0u);
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, proposed);
}

// A draft that is the model keeps every sampled proposal under the rule — p and q agree up to the summation order of
// one forward over several tokens — but those of the step that ends the run past its last token; replay keeps a
// greedy proposal only with the model's p(x).
TEST(SpeculativeSampling, ADraftThatIsTheModelHasItsSampledProposalsKept) {
  test::TempDir dir;
  nn::manual_seed(33);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  auto model = models::AutoModelForCausalLM::from_pretrained(dir.path());
  auto draft = models::AutoModelForCausalLM::from_pretrained(dir.path());
  std::size_t proposed[2] = {0, 0}, kept[2] = {0, 0};
  for (int sample = 0; sample < 2; ++sample)
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      GenerateOptions o;
      o.stop.max_new_tokens = 24;
      o.sampling = {.do_sample = true, .temperature = 1.0f, .top_k = 0, .seed = seed};
      o.speculative.draft = draft.get();
      o.speculative.max_proposals = 4;
      o.speculative.draft_sample = sample == 1;
      o.speculative.draft_confidence = 0;  // a random model is never confident: propose anyway
      const GenerateResult r = generate(*model, nullptr, std::vector<TokenId>{5, 17, 23}, o);
      proposed[sample] += r.speculative.proposed;
      kept[sample] += r.speculative.accepted;
      if (sample == 1) {
        EXPECT_GE(r.speculative.accepted + 4, r.speculative.proposed) << "seed " << seed;
      }
    }
  const double rule = static_cast<double>(kept[1]) / static_cast<double>(proposed[1]);
  const double replay = static_cast<double>(kept[0]) / static_cast<double>(proposed[0]);
  EXPECT_GT(rule, 0.85) << kept[1] << " of " << proposed[1];
  EXPECT_LT(replay, rule - 0.2) << "replay keeps " << kept[0] << " of " << proposed[0];
}

}  // namespace
}  // namespace ferry::text
