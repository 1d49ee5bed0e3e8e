// Speculative decoding (include/ferry/text/speculative.h): the output is plain decoding's, token for token — greedy
// for every decoder-only family and T5, resident and with layers on disk, and sampled with the same seed — whether
// the proposals always agree, never agree or are random; prompt lookup proposes the continuation of the latest
// earlier n-gram; a draft model that is the model itself has every proposal kept; a sequence's state cropped after a
// rejection continues as a fresh prefill of the kept tokens does; a draft of another vocabulary is an error naming
// both models; in a batch each sequence speculates on its own.
#include <gtest/gtest.h>

#include <random>

#include "ferry/core/error.h"
#include "ferry/models/auto_model.h"
#include "ferry/nn/init.h"
#include "ferry/text/batch_generate.h"
#include "ferry/text/generate.h"
#include "support/hf_folder.h"
#include "text/proposer.h"
#include "text/speculation_gate.h"
#include "text/speculative_generate.h"

namespace ferry::text {
namespace {

// Prompts that repeat themselves, so prompt lookup finds n-grams (and the output, looping, more).
const std::vector<TokenId> kPrompt{5, 17, 23, 5, 17, 23, 41, 5, 17, 9, 30, 5, 17};

GenerateOptions greedy(std::size_t n) {
  GenerateOptions o;
  o.stop.max_new_tokens = n;
  return o;
}

// A proposer scripted from the plain run's tokens: `agree` proposes them, else each proposal is the plain token + 1
// (never what the model picks), or random tokens.
class Scripted final : public detail::Proposer {
 public:
  enum Mode { Agree, Disagree, Random };
  Scripted(std::vector<TokenId> all, Mode mode, int64_t vocab) : all_(std::move(all)), mode_(mode), vocab_(vocab) {}
  std::vector<TokenId> propose(std::span<const TokenId> tokens, int64_t k) override {
    std::vector<TokenId> out;
    for (int64_t i = 0; i < k; ++i) {
      const std::size_t pos = tokens.size() + static_cast<std::size_t>(i);
      if (mode_ == Agree && pos >= all_.size()) break;  // nothing to agree with past the plain run's end
      const TokenId want = pos < all_.size() ? all_[pos] : 0;
      out.push_back(mode_ == Agree      ? want
                    : mode_ == Disagree ? (want + 1) % vocab_
                                        : static_cast<TokenId>(rng_() % static_cast<uint32_t>(vocab_)));
    }
    return out;
  }

 private:
  std::vector<TokenId> all_;
  Mode mode_;
  int64_t vocab_;
  std::mt19937 rng_{7};
};

// The llama of `folder` with its layers read from disk (`offload`), two modules read ahead.
std::shared_ptr<models::CausalLM> layers_on_disk(const std::filesystem::path& folder,
                                                 const std::filesystem::path& offload) {
  DeviceMap map{{"model.embed_tokens", Device::cpu()},
                {"model.layers", Device::disk()},
                {"model.norm", Device::cpu()},
                {"lm_head", Device::cpu()}};
  return models::AutoModelForCausalLM::from_pretrained(folder,
                                                       {.device_map = map, .offload_folder = offload, .prefetch = 2});
}

GenerateResult with_proposer(models::LanguageModel& model, const std::vector<TokenId>& prompt, const GenerateOptions& o,
                             detail::Proposer& proposer, int64_t most = 4) {
  const std::vector<int64_t> p(prompt.begin(), prompt.end());
  return detail::speculative_generate(model, nullptr, p, sequence_max_length(model, prompt, o), o, {}, proposer, most);
}

void expect_plain(models::LanguageModel& model, const std::vector<TokenId>& prompt, const GenerateOptions& plain_o,
                  const std::string& what) {
  SCOPED_TRACE(what);
  const GenerateResult plain = generate(model, nullptr, prompt, plain_o);
  const std::vector<int64_t> first = model.first_input(std::vector<int64_t>(prompt.begin(), prompt.end()));
  std::vector<TokenId> all(first.begin(), first.end());
  all.insert(all.end(), plain.generated_ids.begin(), plain.generated_ids.end());
  const int64_t vocab = model.model_info().vocab_size;
  for (auto mode : {Scripted::Agree, Scripted::Disagree, Scripted::Random}) {
    Scripted s(all, mode, vocab);
    const GenerateResult got = with_proposer(model, prompt, plain_o, s);
    EXPECT_EQ(got.generated_ids, plain.generated_ids) << "mode " << mode;
    EXPECT_EQ(got.stop_reason, plain.stop_reason) << "mode " << mode;
    const auto& st = got.speculative;
    EXPECT_GT(st.proposed, 0u);
    if (mode == Scripted::Agree) {
      // Every proposal kept, but for the one that brings the last token: the sequence stops on it before the count.
      EXPECT_GE(st.accepted + 1, st.proposed);
      EXPECT_LT(st.target_forwards, plain.generated_ids.size() / 2) << "several tokens per forward";
    }
    if (mode == Scripted::Disagree) {
      EXPECT_EQ(st.accepted, 0u);
      EXPECT_EQ(st.target_forwards + 1, plain.generated_ids.size());  // one token per forward, as plain decoding
    }
  }
  GenerateOptions lookup = plain_o;
  lookup.speculative.lookup_tokens = 3;
  const GenerateResult got = generate(model, nullptr, prompt, lookup);
  EXPECT_EQ(got.generated_ids, plain.generated_ids) << "prompt lookup";
  EXPECT_GT(got.speculative.proposed, 0u) << "prompt lookup";
}

TEST(Speculative, GreedyEqualsPlainForEveryFamilyAndProposer) {
  for (const auto& [name, config] : test::tiny_causal_configs()) {
    test::TempDir dir;
    nn::manual_seed(21);
    test::write_random_hf_folder(dir.path(), config);
    auto model = models::AutoModelForCausalLM::from_pretrained(dir.path());
    expect_plain(*model, kPrompt, greedy(24), name);
  }
}

TEST(Speculative, GreedyEqualsPlainOffloadedToDiskAndForT5) {
  test::TempDir dir, offload("ferry-offload"), t5dir;
  nn::manual_seed(22);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  auto offloaded = layers_on_disk(dir.path(), offload.path());
  expect_plain(*offloaded, kPrompt, greedy(20), "llama, layers on disk");
  test::write_random_seq2seq_folder(t5dir.path(), test::tiny_t5_config());
  auto t5 = models::AutoModelForSeq2SeqLM::from_pretrained(t5dir.path());
  expect_plain(*t5, kPrompt, greedy(16), "t5");
}

TEST(Speculative, SampledWithAGreedyDraftEqualsPlainSampling) {
  test::TempDir dir;
  nn::manual_seed(23);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  auto model = models::AutoModelForCausalLM::from_pretrained(dir.path());
  auto draft = models::AutoModelForCausalLM::from_pretrained(dir.path());  // proposes the model's argmax
  std::size_t kept = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    GenerateOptions o = greedy(20);
    o.sampling.do_sample = true;
    o.sampling.temperature = seed % 2 ? 0.3f : 1.0f;
    o.sampling.top_k = 20;
    o.sampling.seed = seed;
    const GenerateResult plain = generate(*model, nullptr, kPrompt, o);
    GenerateOptions s = o;
    s.speculative.lookup_tokens = 4;  // lookup first, the draft where lookup has nothing
    s.speculative.draft = draft.get();
    s.speculative.draft_sample = false;  // greedy proposals, verified by replay
    s.speculative.draft_confidence = 0;  // a random model is never confident: propose anyway
    const GenerateResult got = generate(*model, nullptr, kPrompt, s);
    EXPECT_EQ(got.generated_ids, plain.generated_ids) << "seed " << seed;
    kept += got.speculative.accepted;
  }
  EXPECT_GT(kept, 0u) << "some sampled tokens came from proposals";
}

TEST(Speculative, DraftModelThatIsTheModelHasEveryProposalKept) {
  test::TempDir dir;
  nn::manual_seed(24);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  auto model = models::AutoModelForCausalLM::from_pretrained(dir.path());
  auto draft = models::AutoModelForCausalLM::from_pretrained(dir.path());
  const GenerateResult plain = generate(*model, nullptr, kPrompt, greedy(20));
  GenerateOptions o = greedy(20);
  o.speculative.draft = draft.get();
  o.speculative.max_proposals = 4;
  o.speculative.draft_confidence = 0;  // a random model is never confident: propose anyway
  const GenerateResult got = generate(*model, nullptr, kPrompt, o);
  EXPECT_EQ(got.generated_ids, plain.generated_ids);
  EXPECT_GE(got.speculative.accepted + 4, got.speculative.proposed);  // the last step may propose past the stop
  EXPECT_LT(got.speculative.target_forwards, 10u);
  EXPECT_GE(got.speculative.draft_forwards, got.speculative.proposed);
  // A draft of other weights (same shapes): proposals partly rejected, output still the model's.
  test::TempDir other;
  nn::manual_seed(99);
  test::write_random_hf_folder(other.path(), test::tiny_llama_config());
  auto stranger = models::AutoModelForCausalLM::from_pretrained(other.path());
  o.speculative.draft = stranger.get();
  EXPECT_EQ(generate(*model, nullptr, kPrompt, o).generated_ids, plain.generated_ids);
}

// A draft whose most likely token is below draft_confidence (a random model over 128 tokens: a few per cent) stops
// before proposing: each step runs it once and proposes nothing, and the output is plain decoding's. In auto mode the
// draft proposes while the chance that all its proposals are kept stays above the measured cost ratio: everything it
// may at a ratio of 0, nothing at 0.5.
TEST(Speculative, ADraftThatIsNotConfidentProposesNothing) {
  test::TempDir dir, other;
  nn::manual_seed(30);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  nn::manual_seed(31);
  test::write_random_hf_folder(other.path(), test::tiny_llama_config());
  auto model = models::AutoModelForCausalLM::from_pretrained(dir.path());
  auto draft = models::AutoModelForCausalLM::from_pretrained(other.path());
  for (bool sample : {false, true}) {
    GenerateOptions o = greedy(16);
    o.sampling = {.do_sample = sample, .top_k = 0, .seed = 3};
    const GenerateResult plain = generate(*model, nullptr, kPrompt, o);
    o.speculative.draft = draft.get();
    o.speculative.draft_confidence = 0.4;  // transformers' assistant_confidence_threshold
    const GenerateResult got = generate(*model, nullptr, kPrompt, o);
    EXPECT_EQ(got.speculative.proposed, 0u) << "sample " << sample;
    EXPECT_GT(got.speculative.draft_forwards, 0u) << "sample " << sample;
    EXPECT_EQ(got.generated_ids, plain.generated_ids) << "sample " << sample;
  }
}

TEST(Speculative, AutoConfidenceWeighsTheDraftsCost) {
  test::TempDir dir;
  nn::manual_seed(32);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  auto model = models::AutoModelForCausalLM::from_pretrained(dir.path());
  auto draft = models::AutoModelForCausalLM::from_pretrained(dir.path());
  const std::vector<int64_t> prompt(kPrompt.begin(), kPrompt.end());
  for (double ratio : {0.0, 0.5}) {
    detail::DraftModel d(*draft, *model, prompt, DType::F32, std::nullopt, /*confidence=*/-1);
    d.set_cost_ratio(ratio);
    std::vector<TokenId> tokens(kPrompt.begin(), kPrompt.end());
    tokens.push_back(7);
    EXPECT_EQ(d.propose(tokens, 4).size(), ratio == 0 ? 4u : 0u) << "cost ratio " << ratio;
  }
}

TEST(Speculative, DraftOfAnotherVocabularyIsAnErrorNamingBoth) {
  test::TempDir dir, other;
  nn::manual_seed(25);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  auto config = test::tiny_gpt2_config();
  config["vocab_size"] = 50;
  test::write_random_hf_folder(other.path(), config);
  auto model = models::AutoModelForCausalLM::from_pretrained(dir.path());
  auto draft = models::AutoModelForCausalLM::from_pretrained(other.path());
  GenerateOptions o = greedy(4);
  o.speculative.draft = draft.get();
  try {
    generate(*model, nullptr, kPrompt, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("LlamaForCausalLM"), std::string::npos) << msg;
    EXPECT_NE(msg.find("GPT2LMHeadModel"), std::string::npos) << msg;
    EXPECT_NE(msg.find("vocabulary"), std::string::npos) << msg;
  }
}

// In a batch each sequence speculates on its own (its proposers, acceptance and rollback): sequences with prompt
// lookup, a greedy draft, a draft that samples, and none, admitted together and at different steps, each give what
// they give alone — plain decoding's tokens for replay — for every decoder-only family, T5 and a model whose layers
// are on disk; a sequence whose draft has another vocabulary fails alone.
void expect_batch_speculates_per_sequence(models::LanguageModel& model, models::LanguageModel& draft,
                                          const std::string& what) {
  SCOPED_TRACE(what);
  const std::vector<std::vector<TokenId>> prompts{kPrompt, {9, 30, 5, 17, 9, 30, 5}, {3, 3, 3, 3}, {41, 5, 17, 23}};
  GenerateOptions base = greedy(18);
  base.speculative.draft_confidence = 0;  // random models are never confident: propose anyway
  std::vector<GenerateOptions> opts(6, base);
  opts[0].speculative.lookup_tokens = 3;
  opts[1].speculative.draft = &draft;
  opts[1].speculative.max_proposals = 3;
  opts[2].speculative.lookup_tokens = 2;
  opts[2].speculative.draft = &draft;  // lookup first, the draft where it has nothing
  // opts[3]: plain
  opts[4].sampling = {.do_sample = true, .temperature = 0.8f, .top_k = 20, .seed = 5};
  opts[4].speculative.draft = &draft;
  opts[4].speculative.draft_sample = false;  // replay: plain sampling's tokens
  opts[5].sampling = {.do_sample = true, .temperature = 0.8f, .top_k = 20, .seed = 6};
  opts[5].speculative.draft = &draft;                           // speculative sampling's rule: its own draws
  BatchGenerator batch(model, nullptr, {.max_batch_size = 4});  // the last two wait for room
  for (std::size_t i = 0; i < opts.size(); ++i) batch.add(prompts[i % prompts.size()], opts[i]);
  const std::vector<SequenceResult> got = batch.run();
  ASSERT_EQ(got.size(), opts.size());
  for (std::size_t i = 0; i < opts.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].error;
    const auto& st = got[i].result.speculative;
    if (i == 5) {  // the rule: right length, the draft consulted
      EXPECT_EQ(got[i].result.generated_ids.size(), 18u);
      EXPECT_GT(st.proposed, 0u);
      continue;
    }
    GenerateOptions plain = opts[i];
    plain.speculative = {};
    EXPECT_EQ(got[i].result.generated_ids, generate(model, nullptr, prompts[i % prompts.size()], plain).generated_ids)
        << "sequence " << i;
    if (i == 3) {
      EXPECT_EQ(st.proposed, 0u);
    } else {
      EXPECT_GT(st.proposed, 0u) << "sequence " << i;
    }
    if (i == 1 || i == 4) {
      EXPECT_GT(st.draft_forwards, 0u) << "sequence " << i;
    }
  }
}

TEST(Speculative, BatchedSequencesSpeculateEachOnItsOwn) {
  for (const auto& [name, config] : test::tiny_causal_configs()) {
    test::TempDir dir;
    nn::manual_seed(27);
    test::write_random_hf_folder(dir.path(), config);
    auto model = models::AutoModelForCausalLM::from_pretrained(dir.path());
    auto draft = models::AutoModelForCausalLM::from_pretrained(dir.path());
    expect_batch_speculates_per_sequence(*model, *draft, name);
  }
  test::TempDir t5dir, dir, offload("ferry-offload");
  test::write_random_seq2seq_folder(t5dir.path(), test::tiny_t5_config());
  auto t5 = models::AutoModelForSeq2SeqLM::from_pretrained(t5dir.path());
  auto t5_draft = models::AutoModelForSeq2SeqLM::from_pretrained(t5dir.path());
  expect_batch_speculates_per_sequence(*t5, *t5_draft, "t5");
  nn::manual_seed(28);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  auto offloaded = layers_on_disk(dir.path(), offload.path());
  auto small = models::AutoModelForCausalLM::from_pretrained(dir.path());
  expect_batch_speculates_per_sequence(*offloaded, *small, "llama, layers on disk");
}

TEST(Speculative, BatchedSequenceWithADraftOfAnotherVocabularyFailsAlone) {
  test::TempDir dir, other;
  nn::manual_seed(29);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  auto config = test::tiny_gpt2_config();
  config["vocab_size"] = 50;
  test::write_random_hf_folder(other.path(), config);
  auto model = models::AutoModelForCausalLM::from_pretrained(dir.path());
  auto draft = models::AutoModelForCausalLM::from_pretrained(other.path());
  BatchGenerator batch(*model, nullptr);
  GenerateOptions bad = greedy(4);
  bad.speculative.draft = draft.get();
  batch.add(kPrompt, greedy(4));
  batch.add(kPrompt, bad);
  const auto r = batch.run();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].ok());
  EXPECT_EQ(r[0].result.generated_ids.size(), 4u);
  EXPECT_FALSE(r[1].ok());
  EXPECT_NE(r[1].error.find("GPT2LMHeadModel"), std::string::npos) << r[1].error;
  EXPECT_NE(r[1].error.find("vocabulary"), std::string::npos) << r[1].error;
}

// The gate on synthetic timings: plain steps 0.1 s for a token; proposing steps that give 3 tokens in 0.15 s pay and
// never pause; ones that give 1.2 tokens in 0.15 s pause, for 16 steps, then 32 while they keep losing, and back to
// 16 once they pay.
TEST(Speculative, GatePausesProposingThatDoesNotPay) {
  detail::SpeculationGate paying;
  for (int i = 0; i < 4; ++i) paying.record(true, 0.15, 3);
  EXPECT_FALSE(paying.propose_now());  // no plain steps yet: two are measured
  paying.record(false, 0.1, 1);
  paying.record(false, 0.1, 1);
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(paying.propose_now()) << i;
    paying.record(true, 0.15, 3);
  }
  detail::SpeculationGate losing;
  losing.record(false, 0.1, 1);
  losing.record(false, 0.1, 1);
  for (int i = 0; i < 4; ++i) losing.record(true, 0.15, 1);
  ASSERT_FALSE(losing.propose_now());
  EXPECT_EQ(losing.paused_steps(), detail::SpeculationGate::kFirstPause);
  for (int i = 0; i < detail::SpeculationGate::kFirstPause; ++i) losing.record(false, 0.1, 1);
  ASSERT_TRUE(losing.propose_now());
  for (int i = 0; i < 4; ++i) losing.record(true, 0.15, 1);
  EXPECT_EQ(losing.paused_steps(), 2 * detail::SpeculationGate::kFirstPause);
  for (int i = 0; i < 2 * detail::SpeculationGate::kFirstPause; ++i) losing.record(false, 0.1, 1);
  for (int i = 0; i < 4; ++i) losing.record(true, 0.15, 4);  // now it pays: no pause, and the next one is short
  EXPECT_TRUE(losing.propose_now());
  for (int i = 0; i < 8; ++i) losing.record(true, 0.15, 1);
  EXPECT_EQ(losing.paused_steps(), detail::SpeculationGate::kFirstPause);
}

TEST(Speculative, PromptLookupProposesTheLatestContinuation) {
  detail::PromptLookup lookup(3);
  // No earlier "7 5 17"; the latest earlier "5 17" (at 5) is followed by "99 7 5".
  const std::vector<TokenId> t{5, 17, 23, 41, 8, 5, 17, 99, 7, 5, 17};
  EXPECT_EQ(lookup.propose(t, 3), (std::vector<TokenId>{99, 7, 5}));
  EXPECT_EQ(lookup.propose(t, 1), (std::vector<TokenId>{99}));
  const std::vector<TokenId> none{1, 2, 3, 4};
  EXPECT_TRUE(lookup.propose(none, 3).empty());
  const std::vector<TokenId> tail{1, 2, 3, 1, 2};  // continuation runs into the suffix itself
  EXPECT_EQ(lookup.propose(tail, 5), (std::vector<TokenId>{3, 1, 2}));
  EXPECT_TRUE(lookup.propose(t, 0).empty());
}

TEST(Speculative, CroppedStateContinuesAsAFreshPrefill) {
  test::TempDir dir;
  nn::manual_seed(26);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  auto model = models::AutoModelForCausalLM::from_pretrained(dir.path());
  const std::vector<int64_t> prompt{3, 14, 15, 92};
  auto run = [&](const std::vector<int64_t>& first, int64_t crop_to, int64_t next) {
    models::SequenceStart s = model->start_sequence(prompt, DType::F32);
    models::StepRow row{s.state, static_cast<int64_t>(first.size())};
    model->forward_step(Tensor::from_vector(first, {row.tokens}), {&row, 1}, 1);
    s.state->crop(crop_to);
    EXPECT_EQ(s.state->length(), crop_to);
    row.tokens = 1;
    return model->forward_step(Tensor::from_vector(std::vector<int64_t>{next}, {1}), {&row, 1}, 1).to_vector<float>();
  };
  // Prompt + three rejected tokens, cropped back to the prompt + one kept token, then the next token; against the
  // prompt + the kept token prefilled fresh, then the same next token.
  const std::vector<float> cropped = run({3, 14, 15, 92, 65, 35, 89, 7}, 5, 44);
  const std::vector<float> fresh = run({3, 14, 15, 92, 65}, 5, 44);
  ASSERT_EQ(cropped.size(), fresh.size());
  for (std::size_t i = 0; i < fresh.size(); ++i) EXPECT_NEAR(cropped[i], fresh[i], 1e-5f * (1 + std::abs(fresh[i])));
}

}  // namespace
}  // namespace ferry::text
