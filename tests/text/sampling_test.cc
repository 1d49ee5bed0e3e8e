// Sampling: each HF logits processor on known inputs, then the Sampler's draws with fixed seeds. The
// statistical checks use fixed seeds, so they are deterministic; their tolerances (6 standard
// deviations) would also hold for any other seed with overwhelming probability.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "ferry/core/error.h"
#include "ferry/text/sampling.h"

namespace ferry::text {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
using Logits = std::vector<float>;

Logits log_probs(std::initializer_list<double> probs) {
  Logits out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

TEST(Sampling, ArgmaxPicksTheFirstOfEqualMaxima) {
  EXPECT_EQ(argmax(Logits{1, 3, 3, 2}), 1);
  EXPECT_EQ(argmax(Logits{kNegInf, -5}), 1);
  EXPECT_THROW(argmax(Logits{}), Error);
  EXPECT_THROW(argmax(Logits{1, std::nanf("")}), Error);
}

TEST(Sampling, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  Logits l{2, -2, 1, 0};
  apply_repetition_penalty(l, std::vector<TokenId>{0, 1, 1, 3}, 2.0f);
  EXPECT_EQ(l, (Logits{1, -4, 1, 0}));  // id 1 is penalised once although it occurs twice
  EXPECT_THROW(apply_repetition_penalty(l, std::vector<TokenId>{4}, 2.0f), Error);
  EXPECT_THROW(apply_repetition_penalty(l, std::vector<TokenId>{-1}, 2.0f), Error);
}

TEST(Sampling, TemperatureTopKTopPMinP) {
  Logits t{2, -4};
  apply_temperature(t, 0.5f);
  EXPECT_EQ(t, (Logits{4, -8}));
  EXPECT_THROW(apply_temperature(t, 0.0f), Error);

  Logits k{1, 5, 3, 5, 2};
  apply_top_k(k, 2);
  EXPECT_EQ(k, (Logits{kNegInf, 5, kNegInf, 5, kNegInf}));
  Logits tie{1, 2, 2, 0};
  apply_top_k(tie, 2);  // everything tied with the 2nd largest stays
  EXPECT_EQ(tie, (Logits{kNegInf, 2, 2, kNegInf}));

  // probabilities 0.5 0.3 0.15 0.05
  Logits p = log_probs({0.15, 0.5, 0.05, 0.3});
  apply_top_p(p, 0.75f);  // 0.5 + 0.3 reaches 0.75: keep two
  EXPECT_EQ(std::count(p.begin(), p.end(), kNegInf), 2);
  EXPECT_NE(p[1], kNegInf);
  EXPECT_NE(p[3], kNegInf);
  Logits p3 = log_probs({0.15, 0.5, 0.05, 0.3});
  apply_top_p(p3, 0.85f);
  EXPECT_EQ(p3[2], kNegInf);
  EXPECT_NE(p3[0], kNegInf);
  Logits p_tiny = log_probs({0.15, 0.5, 0.05, 0.3});
  apply_top_p(p_tiny, 1e-6f);  // always at least the best token
  EXPECT_EQ(std::count(p_tiny.begin(), p_tiny.end(), kNegInf), 3);

  Logits m = log_probs({0.15, 0.5, 0.05, 0.3});
  apply_min_p(m, 0.2f);  // threshold 0.2 * 0.5 = 0.1 drops only 0.05
  EXPECT_EQ(m[2], kNegInf);
  EXPECT_EQ(std::count(m.begin(), m.end(), kNegInf), 1);
}

TEST(Sampler, GreedyByDefault) {
  Sampler s;
  EXPECT_EQ(s.sample(Logits{0.1f, 0.7f, 0.2f}), 1);
  Sampler penalised({.repetition_penalty = 10.0f});
  EXPECT_EQ(penalised.sample(Logits{0.1f, 0.7f, 0.2f}, std::vector<TokenId>{1}), 2);
}

Logits random_logits(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  Logits l(n);
  // distinct values on a 0.25 grid, shuffled: every gap is at least 0.25
  for (std::size_t i = 0; i < n; ++i) l[i] = 0.25f * static_cast<float>(i) - 10.0f;
  std::shuffle(l.begin(), l.end(), rng.engine());
  return l;
}

TEST(Sampler, ZeroTemperatureLimitIsGreedy) {
  const Logits l = random_logits(200, 3);
  Sampler s({.do_sample = true, .temperature = 1e-3f, .top_k = 0, .seed = 11});
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(s.sample(l), argmax(l));
}

TEST(Sampler, TopKNeverLeavesTheTopK) {
  const Logits l = random_logits(100, 5);
  std::vector<int> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
  const std::set<int> top5(order.begin(), order.begin() + 5);
  Sampler s({.do_sample = true, .temperature = 50.0f, .top_k = 5, .seed = 1});  // hot: nearly uniform
  std::set<int> seen;
  for (int i = 0; i < 5000; ++i) {
    const TokenId t = s.sample(l);
    ASSERT_TRUE(top5.count(t)) << "sampled " << t << ", outside the top 5";
    seen.insert(t);
  }
  EXPECT_EQ(seen, top5);  // and every one of them is reachable
}

TEST(Sampler, FrequenciesMatchSoftmax) {
  const Logits l{1.0f, 2.0f, 0.5f, 3.0f, -1.0f};
  std::vector<double> p;
  softmax(l, p);
  constexpr int kDraws = 200000;
  Sampler s({.do_sample = true, .top_k = 0, .seed = 2024});
  std::vector<int> count(l.size(), 0);
  for (int i = 0; i < kDraws; ++i) ++count[static_cast<std::size_t>(s.sample(l))];
  for (std::size_t i = 0; i < l.size(); ++i) {
    const double freq = static_cast<double>(count[i]) / kDraws;
    const double sigma = std::sqrt(p[i] * (1 - p[i]) / kDraws);
    EXPECT_NEAR(freq, p[i], 6 * sigma) << "token " << i;
  }
}

TEST(Sampler, TopPFrequenciesRenormaliseOverTheNucleus) {
  const Logits l = log_probs({0.5, 0.3, 0.15, 0.05});
  Sampler s({.do_sample = true, .top_k = 0, .top_p = 0.75f, .seed = 9});
  constexpr int kDraws = 100000;
  int first = 0;
  for (int i = 0; i < kDraws; ++i) {
    const TokenId t = s.sample(l);
    ASSERT_LT(t, 2);
    first += t == 0;
  }
  const double p = 0.5 / 0.8, sigma = std::sqrt(p * (1 - p) / kDraws);
  EXPECT_NEAR(static_cast<double>(first) / kDraws, p, 6 * sigma);
}

TEST(Sampler, SeedsReproduce) {
  const Logits l = random_logits(50, 8);
  auto draw = [&](std::uint64_t seed) {
    Sampler s({.do_sample = true, .temperature = 5.0f, .top_k = 0, .seed = seed});
    std::vector<TokenId> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(l));
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(Sampler, RngIsTheStandardMersenneTwister) {
  Rng rng(5489);  // the C++ standard fixes mt19937_64's 10000th output for the default seed
  rng.engine().discard(9999);
  EXPECT_EQ(rng.engine()(), 9981545732273789042ull);
  Rng a(7), b(7);
  const double u = a.uniform();
  EXPECT_EQ(u, static_cast<double>(b.engine()() >> 11) * 0x1.0p-53);
  EXPECT_GE(u, 0.0);
  EXPECT_LT(u, 1.0);
}

TEST(Sampler, RejectsBadOptionsAndDegenerateLogits) {
  EXPECT_THROW(Sampler({.do_sample = true, .temperature = 0.0f}), Error);
  EXPECT_THROW(Sampler({.top_p = 0.0f}), Error);
  EXPECT_THROW(Sampler({.min_p = 1.5f}), Error);
  EXPECT_THROW(Sampler({.repetition_penalty = 0.0f}), Error);
  Sampler s({.do_sample = true, .top_k = 0});
  EXPECT_THROW(s.sample(Logits{kNegInf, kNegInf}), Error);
  EXPECT_THROW(s.sample(Logits{0.0f, std::nanf("")}), Error);
}

}  // namespace
}  // namespace ferry::text
