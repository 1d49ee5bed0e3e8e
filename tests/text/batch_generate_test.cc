// BatchGenerator: continuous batching gives every sequence the tokens generate() gives it alone — for every
// architecture, greedy and seeded sampling, sequences joining and leaving between steps — with per-sequence stop
// criteria, callbacks and cancellation; bad requests fail alone while the others complete; the KV cache budget
// holds sequences back instead of overrunning.
#include "ferry/text/batch_generate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "ferry/big_modeling/cpu_offload.h"
#include "ferry/io/staged_reader.h"
#include "ferry/models/auto_model.h"
#include "ferry/nn/init.h"
#include "support/hf_folder.h"
#include "tiny_tokenizer.h"

namespace ferry::text {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<models::CausalLM> random_model(const nlohmann::json& config) {
  nn::manual_seed(7);
  return models::AutoModelForCausalLM::from_config(models::ConfigJson::from_json(config), DType::F32);
}

struct Request {
  std::vector<TokenId> prompt;
  GenerateOptions options;
};

// Prompts of 1 to 9 tokens with different lengths of generation; odd ones sample with their own seed.
std::vector<Request> requests(int64_t vocab) {
  std::vector<Request> r;
  for (int i = 0; i < 7; ++i) {
    Request q;
    for (int t = 0; t <= (i * 4) % 9; ++t) q.prompt.push_back(static_cast<TokenId>((i * 31 + t * 7 + 1) % vocab));
    q.options.stop.max_new_tokens = static_cast<std::size_t>(3 + (i * 5) % 8);
    q.options.record_logits = 4;
    if (i % 2 == 1) q.options.sampling = {.do_sample = true, .temperature = 1.5f, .top_k = 0, .seed = 100u + i};
    r.push_back(q);
  }
  return r;
}

double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, m = 1e-30;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::abs(a[i] - b[i]))), m = std::max(m, double(std::abs(b[i])));
  return d / m;
}

void expect_same_as_alone(const GenerateResult& got, const GenerateResult& want, const std::string& what) {
  EXPECT_EQ(got.prompt_ids, want.prompt_ids) << what;
  EXPECT_EQ(got.generated_ids, want.generated_ids) << what;
  EXPECT_EQ(got.stop_reason, want.stop_reason) << what;
  ASSERT_EQ(got.step_logits.size(), want.step_logits.size()) << what;
  for (std::size_t s = 0; s < got.step_logits.size(); ++s) {
    EXPECT_LE(rel_diff(got.step_logits[s], want.step_logits[s]), 1e-5) << what << " step " << s;
  }
}

struct Arch {
  std::string name;
  nlohmann::json config;
};

class BatchGenerateTest : public ::testing::TestWithParam<Arch> {};

TEST_P(BatchGenerateTest, EverySequenceGetsWhatItGetsAlone) {
  auto model = random_model(GetParam().config);
  const auto reqs = requests(model->info().vocab_size);
  // Batches of 3 among 7 sequences: finished ones leave and waiting ones join mid-run.
  BatchGenerator gen(*model, nullptr, {.max_batch_size = 3});
  for (const auto& r : reqs) gen.add(r.prompt, r.options);
  EXPECT_EQ(gen.waiting(), 7);
  int64_t most_running = 0;
  std::vector<SequenceResult> results;
  while (gen.has_work()) {
    auto done = gen.step();
    most_running = std::max(most_running, gen.running() + static_cast<int64_t>(done.size()));
    for (auto& d : done) results.push_back(std::move(d));
  }
  EXPECT_EQ(most_running, 3);
  ASSERT_EQ(results.size(), reqs.size());
  std::sort(results.begin(), results.end(), [](auto& a, auto& b) { return a.id < b.id; });
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].error;
    EXPECT_EQ(results[i].id, static_cast<SequenceId>(i));
    expect_same_as_alone(results[i].result, generate(*model, nullptr, reqs[i].prompt, reqs[i].options),
                         "sequence " + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, BatchGenerateTest,
                         ::testing::Values(Arch{"llama", test::tiny_llama_config()},
                                           Arch{"mistral", test::tiny_mistral_config()},
                                           Arch{"qwen2", test::tiny_qwen2_config()},
                                           Arch{"gpt2", test::tiny_gpt2_config()},
                                           Arch{"gptj", test::tiny_gptj_config()}),
                         [](const auto& info) { return info.param.name; });

TEST(BatchGenerate, StopCriteriaCallbacksAndTextArePerSequence) {
  auto model = random_model(test::tiny_llama_config());
  const Tokenizer tok = Tokenizer::from_json(testing::tiny_tokenizer_json().dump());
  ASSERT_LE(tok.vocab_size(), model->info().vocab_size);
  GenerateOptions o;
  o.stop.max_new_tokens = 6;
  const GenerateResult alone = generate(*model, tok, "abcd", o);
  GenerateOptions eos = o;
  eos.stop.eos_token_ids = {alone.generated_ids[1]};

  BatchGenerator gen(*model, &tok, {.max_batch_size = 8});
  std::string streamed[3];
  std::vector<TokenId> seen[3];
  auto collect = [&](int i) {
    return [&, i](std::string_view piece, TokenId id) {
      streamed[i] += piece;
      if (id != kEndOfText) seen[i].push_back(id);
      return i != 2 || seen[i].size() < 2;  // sequence 2 stops itself after two tokens
    };
  };
  gen.add("abcd", o, collect(0));
  gen.add("abcd", eos, collect(1));
  gen.add("abcd", o, collect(2));
  auto results = gen.run();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].result.generated_ids, alone.generated_ids);
  EXPECT_EQ(results[0].result.text, alone.text);
  EXPECT_EQ(results[0].result.stop_reason, StopReason::MaxNewTokens);
  EXPECT_EQ(results[1].result.generated_ids.size(), 2u);
  EXPECT_EQ(results[1].result.stop_reason, StopReason::EosToken);
  EXPECT_EQ(results[2].result.generated_ids.size(), 2u);
  EXPECT_EQ(results[2].result.stop_reason, StopReason::Cancelled);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(streamed[i], results[static_cast<std::size_t>(i)].result.text) << i;
    EXPECT_EQ(seen[i], results[static_cast<std::size_t>(i)].result.generated_ids) << i;
  }
}

TEST(BatchGenerate, BadRequestsFailAloneAndTheOthersComplete) {
  auto model = random_model(test::tiny_gpt2_config());  // vocab 96, n_positions 64
  GenerateOptions o;
  o.stop.max_new_tokens = 4;
  const std::vector<TokenId> good = {1, 2, 3};
  const GenerateResult want = generate(*model, nullptr, good, o);
  GenerateOptions bad_sampling = o;
  bad_sampling.sampling = {.do_sample = true, .temperature = -1.0f};
  GenerateOptions huge = o;
  huge.stop.max_new_tokens = 1000;

  const auto& info = model->info();
  const auto per_token = static_cast<std::size_t>(info.kv_cache_bytes_per_token());
  BatchGenerator gen(*model, nullptr, {.max_batch_size = 4, .max_kv_cache_bytes = 40 * per_token});
  gen.add(std::vector<TokenId>{}, o);                     // 0: empty
  gen.add(good, o);                                       // 1
  gen.add(std::vector<TokenId>(64, 5), o);                // 2: fills the context
  gen.add(std::vector<TokenId>{1, 96}, o);               // 3: outside the vocabulary
  gen.add(good, bad_sampling);                            // 4: bad sampling settings
  gen.add(std::vector<TokenId>(50, 5), huge);             // 5: KV cache of 64 tokens > budget of 40
  gen.add(good, o);                                       // 6
  auto r = gen.run();
  ASSERT_EQ(r.size(), 7u);
  EXPECT_THAT(r[0].error, HasSubstr("prompt is empty"));
  EXPECT_THAT(r[2].error, HasSubstr("context is 64"));
  EXPECT_THAT(r[3].error, HasSubstr("outside the vocabulary"));
  EXPECT_THAT(r[4].error, HasSubstr("temperature"));
  EXPECT_THAT(r[5].error, HasSubstr("more than the whole budget"));
  for (std::size_t i : {1u, 6u}) {
    EXPECT_TRUE(r[i].ok()) << r[i].error;
    EXPECT_EQ(r[i].result.generated_ids, want.generated_ids) << i;
  }
  EXPECT_EQ(gen.kv_cache_bytes_reserved(), 0u);
}

TEST(BatchGenerate, KvBudgetHoldsSequencesBackInsteadOfOverrunning) {
  auto model = random_model(test::tiny_llama_config());
  const auto& info = model->info();
  GenerateOptions o;
  o.stop.max_new_tokens = 5;
  const std::vector<TokenId> prompt = {3, 4, 5};
  const std::size_t per_sequence = 8 * static_cast<std::size_t>(info.kv_cache_bytes_per_token());
  BatchGenerator gen(*model, nullptr, {.max_batch_size = 16, .max_kv_cache_bytes = 2 * per_sequence + 1});
  for (int i = 0; i < 5; ++i) gen.add(prompt, o);
  std::size_t finished = 0;
  while (gen.has_work()) {
    for (auto& d : gen.step()) {
      EXPECT_TRUE(d.ok()) << d.error;
      ++finished;
    }
    EXPECT_LE(gen.running(), 2);
    EXPECT_LE(gen.kv_cache_bytes_reserved(), 2 * per_sequence);
  }
  EXPECT_EQ(finished, 5u);
}

TEST(BatchGenerate, CancelAndTheContextLimit) {
  auto model = random_model(test::tiny_gpt2_config());  // n_positions 64
  GenerateOptions o;
  o.stop.max_new_tokens = 100;
  BatchGenerator gen(*model, nullptr, {});
  const SequenceId a = gen.add(std::vector<TokenId>(60, 9), o);  // may grow to 64 tokens only
  const SequenceId b = gen.add(std::vector<TokenId>{1}, o);
  const SequenceId c = gen.add(std::vector<TokenId>{2}, o);
  gen.step();
  gen.cancel(b);
  gen.cancel(12345);  // unknown: ignored
  auto r = gen.run();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].id, a);
  EXPECT_EQ(r[0].result.stop_reason, StopReason::MaxLength);
  EXPECT_EQ(r[0].result.prompt_ids.size() + r[0].result.generated_ids.size(), 64u);
  EXPECT_EQ(r[1].id, b);
  EXPECT_EQ(r[1].result.stop_reason, StopReason::Cancelled);
  EXPECT_EQ(r[1].result.generated_ids.size(), 1u);
  EXPECT_EQ(r[2].id, c);
  EXPECT_EQ(r[2].result.generated_ids.size(), 63u);
  EXPECT_EQ(r[2].result.stop_reason, StopReason::MaxLength);
  // generate() alone stops at the context the same way.
  EXPECT_EQ(generate(*model, nullptr, std::vector<TokenId>(60, 9), o).generated_ids, r[0].result.generated_ids);
}

// StopCriteria::max_length (HF max_length, the CLI's --context) caps a sequence below the model's context, alone or
// in a batch; a prompt that reaches it is that sequence's error.
TEST(BatchGenerate, MaxLengthCapsASequenceBelowTheContext) {
  auto model = random_model(test::tiny_gpt2_config());  // n_positions 64
  GenerateOptions o;
  o.stop.max_new_tokens = 100;
  o.stop.max_length = 10;
  BatchGenerator gen(*model, nullptr, {});
  gen.add(std::vector<TokenId>{1, 2, 3}, o);
  gen.add(std::vector<TokenId>(10, 4), o);  // fills max_length
  auto r = gen.run();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].result.generated_ids.size(), 7u);
  EXPECT_EQ(r[0].result.stop_reason, StopReason::MaxLength);
  EXPECT_THAT(r[1].error, ::testing::HasSubstr("leaving no room to generate"));
  const GenerateResult alone = generate(*model, nullptr, std::vector<TokenId>{1, 2, 3}, o);
  EXPECT_EQ(alone.generated_ids, r[0].result.generated_ids);
  EXPECT_EQ(alone.stop_reason, StopReason::MaxLength);
  EXPECT_THROW(generate(*model, nullptr, std::vector<TokenId>(10, 4), o), Error);
}

TEST(BatchGenerate, CpuOffloadedModelGivesTheSameTokens) {
  auto resident = random_model(test::tiny_llama_config());
  auto offloaded = random_model(test::tiny_llama_config());
  cpu_offload(*offloaded, Device::cpu());
  GenerateOptions o;
  o.stop.max_new_tokens = 5;
  BatchGenerator a(*resident, nullptr, {}), b(*offloaded, nullptr, {});
  for (auto* g : {&a, &b})
    for (TokenId t = 1; t < 6; ++t) g->add(std::vector<TokenId>(static_cast<std::size_t>(t), t), o);
  auto ra = a.run(), rb = b.run();
  ASSERT_EQ(ra.size(), rb.size());
  for (std::size_t i = 0; i < ra.size(); ++i) EXPECT_EQ(ra[i].result.generated_ids, rb[i].result.generated_ids) << i;
}

// Throughput mode: a disk-offloaded model reads its weights once per step for the whole batch — eight sequences
// decoding together read exactly the bytes one sequence reads alone — and generates the resident model's tokens.
TEST(BatchGenerate, DiskOffloadedWeightsAreReadOncePerStepForTheWholeBatch) {
  test::TempDir dir, offload("ferry-offload");
  nn::manual_seed(41);
  auto resident = test::write_random_hf_folder(dir.path(), test::tiny_llama_config(), DType::BF16, 20000);
  // Each run on a freshly loaded model with its own reader, so both start and end (prefetches ahead included) alike.
  auto load = [&](std::shared_ptr<io::StagedReader>& reader) {
    reader = std::make_shared<io::StagedReader>(io::StagedReaderOptions{.pool_bytes = 1u << 20});
    return models::AutoModelForCausalLM::from_pretrained(
        dir.path(), {.device_map = DeviceMap{{"", Device::disk()}}, .offload_folder = offload.path(), .prefetch = 2,
                     .offload_io = OffloadIo::Direct, .staged_reader = reader});
  };
  GenerateOptions o;
  o.stop.max_new_tokens = 4;  // 4 forwards: the prefill and 3 decode steps
  const std::vector<TokenId> prompt = {3, 1, 4, 1, 5};
  std::shared_ptr<io::StagedReader> reader1, reader8;
  auto model1 = load(reader1);
  const GenerateResult alone = generate(*model1, nullptr, prompt, o);
  model1.reset();
  const io::StagedReaderStats one = reader1->stats();
  ASSERT_GT(one.tensors, 0u);

  auto model8 = load(reader8);
  std::vector<SequenceResult> results;
  {
    BatchGenerator gen(*model8, nullptr, {.max_batch_size = 8});
    for (int i = 0; i < 8; ++i) gen.add(prompt, o);
    results = gen.run();
  }
  model8.reset();  // as model1 above: its prefetcher ends before the counts are read
  const io::StagedReaderStats eight = reader8->stats();
  // Tensors taken from disk: exactly the same. Bytes: the same up to the read-ahead racing the end of the run — the
  // prefetcher's next modules (prefetch = 2) of a forward that never comes, read or not depending on timing (an ASan
  // CI run saw 479 KB against 559 KB, 14%). At most one forward's bytes of the four; a batch reading per sequence
  // would read eight times as much.
  EXPECT_EQ(eight.tensors, one.tensors) << "8 sequences in 4 steps vs one sequence in 4 forwards";
  EXPECT_NEAR(double(eight.bytes_read), double(one.bytes_read), double(one.bytes_read) / 4);
  for (const auto& r : results) EXPECT_EQ(r.result.generated_ids, alone.generated_ids);
  EXPECT_EQ(alone.generated_ids, generate(*resident, nullptr, prompt, o).generated_ids);
}

TEST(BatchGenerate, BadOptionsAreErrors) {
  auto model = random_model(test::tiny_llama_config());
  EXPECT_THROW(BatchGenerator(*model, nullptr, {.max_batch_size = 0}), Error);
  EXPECT_THROW(BatchGenerator(*model, nullptr, {.max_step_tokens = 0}), Error);
  EXPECT_THROW(BatchGenerator(*model, nullptr, {.kv_cache_dtype = DType::I64}), Error);
  BatchGenerator gen(*model, nullptr, {});
  EXPECT_THROW(gen.add("text needs a tokenizer"), Error);
  EXPECT_TRUE(gen.step().empty());
}

}  // namespace
}  // namespace ferry::text
