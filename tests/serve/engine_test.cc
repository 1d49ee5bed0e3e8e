// The serving engine: requests submitted from many threads at once each get exactly the tokens generate() gives them
// alone; a cancelled request leaves the batch and frees its KV cache; the queue bound answers 503; a draining
// engine refuses new work; a bad request fails alone.
#include "serve/engine.h"

#include <gtest/gtest.h>

#include <limits>
#include <thread>

#include "ferry/models/auto_model.h"
#include "ferry/models/config.h"
#include "ferry/nn/init.h"
#include "ferry/text/generate.h"
#include "support/hf_folder.h"

namespace ferry::serve {
namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<models::CausalLM> tiny_llama() {
  for (auto& [name, config] : test::tiny_causal_configs())
    if (name == "llama") {
      nlohmann::json c = config;
      c["max_position_embeddings"] = 1 << 20;  // long enough that a request runs until cancelled
      nn::manual_seed(11);
      return models::AutoModelForCausalLM::from_config(models::ConfigJson::from_json(c), DType::F32);
    }
  throw std::runtime_error("no tiny llama config");
}

text::GenerateOptions greedy(std::size_t n) {
  text::GenerateOptions o;
  o.stop.max_new_tokens = n;
  return o;
}

// Reads a stream to its end; returns the streamed text.
std::string drain_stream(RequestStream& s) {
  std::string text;
  while (s.next(text, Clock::now() + std::chrono::seconds(60)) == RequestStream::Wait::Text) {
  }
  return text;
}

TEST(ServeEngine, ConcurrentRequestsEachGetTheirSoloTokens) {
  auto model = tiny_llama();
  EngineOptions eo;
  eo.batch.max_batch_size = 4;  // fewer than the clients: some wait and join between steps
  Engine engine(*model, nullptr, eo);
  constexpr int kClients = 10;
  std::vector<std::vector<text::TokenId>> prompts(kClients);
  std::vector<text::GenerateOptions> options(kClients);
  for (int i = 0; i < kClients; ++i) {
    for (int t = 0; t <= i % 5; ++t) prompts[i].push_back(static_cast<text::TokenId>((i * 13 + t * 5 + 1) % 90));
    options[i] = greedy(static_cast<std::size_t>(2 + i % 7));
    if (i % 3 == 0) options[i].sampling = {.do_sample = true, .temperature = 1.3f, .top_k = 0, .seed = 50u + i};
  }
  std::vector<std::vector<text::TokenId>> got(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      auto s = engine.submit(prompts[i], options[i]);
      drain_stream(*s);
      got[i] = s->result().result.generated_ids;
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    const auto alone = text::generate(*model, nullptr, prompts[i], options[i]);
    EXPECT_EQ(got[i], alone.generated_ids) << "client " << i;
  }
  const EngineStats st = engine.stats();
  EXPECT_EQ(st.completed, static_cast<uint64_t>(kClients));
  EXPECT_GT(st.step_rows, st.steps);  // some steps carried several sequences
  EXPECT_TRUE(engine.idle());
}

// The context a sequence may hold: the model's max_position_embeddings, --context when smaller, no limit for an
// encoder-decoder model; the engine reports the same figure the CLI sized the KV budget with.
TEST(ServeEngine, SequenceContextIsTheModelsLimitOrTheRequestedOne) {
  auto model = tiny_llama();
  EXPECT_EQ(sequence_context(*model, 0), int64_t{1} << 20);
  EXPECT_EQ(sequence_context(*model, 300), 300);
  EXPECT_EQ(sequence_context(*model, int64_t{1} << 30), int64_t{1} << 20);
  const auto t5 = models::AutoModelForSeq2SeqLM::from_config(models::ConfigJson::from_json(test::tiny_t5_config()));
  EXPECT_EQ(sequence_context(*t5, 0), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(sequence_context(*t5, 77), 77);
  EngineOptions eo;
  eo.context = 300;
  Engine engine(*model, nullptr, eo);
  EXPECT_EQ(engine.context(), 300);
}

TEST(ServeEngine, CancelledRequestLeavesTheBatchAndFreesItsKvCache) {
  auto model = tiny_llama();
  EngineOptions eo;
  eo.batch.max_kv_cache_bytes = 64u << 20;
  Engine engine(*model, nullptr, eo);
  auto s = engine.submit({1, 2, 3}, greedy(100000));
  std::string text;
  // Wait for the sequence to run, then cancel it as a disconnected client's handler does.
  const auto until = Clock::now() + std::chrono::seconds(30);
  while (engine.stats().kv_cache_bytes == 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GT(engine.stats().kv_cache_bytes, 0u);
  s->cancel();
  ASSERT_TRUE(s->wait_finished(Clock::now() + std::chrono::seconds(30)));
  EXPECT_EQ(s->result().result.stop_reason, text::StopReason::Cancelled);
  EXPECT_TRUE(engine.idle());
  EXPECT_EQ(engine.stats().kv_cache_bytes, 0u);
  EXPECT_EQ(engine.stats().cancelled, 1u);
}

TEST(ServeEngine, FullQueueIs503AndDrainingRefusesNewRequests) {
  auto model = tiny_llama();
  EngineOptions eo;
  eo.batch.max_batch_size = 1;
  eo.max_queue = 1;
  Engine engine(*model, nullptr, eo);
  auto a = engine.submit({1, 2}, greedy(100000));
  auto b = engine.submit({3, 4}, greedy(100000));
  try {
    engine.submit({5}, greedy(1));
    ADD_FAILURE() << "a third request fit a batch of 1 and a queue of 1";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 503);
    EXPECT_EQ(e.code(), "queue_full");
  }
  engine.drain();
  engine.cancel_all();
  EXPECT_TRUE(a->wait_finished(Clock::now() + std::chrono::seconds(30)));
  EXPECT_TRUE(b->wait_finished(Clock::now() + std::chrono::seconds(30)));
  try {
    engine.submit({5}, greedy(1));
    ADD_FAILURE() << "a draining engine took a request";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 503);
  }
  EXPECT_EQ(engine.stats().refused, 2u);
}

TEST(ServeEngine, BadRequestFailsAloneWhileOthersComplete) {
  auto model = tiny_llama();
  Engine engine(*model, nullptr, {});
  auto bad = engine.submit({1, 100000}, greedy(3));  // an id outside the vocabulary
  auto good = engine.submit({1, 2}, greedy(3));
  drain_stream(*bad);
  drain_stream(*good);
  EXPECT_FALSE(bad->result().ok());
  EXPECT_FALSE(bad->server_failed());
  EXPECT_TRUE(good->result().ok());
  EXPECT_EQ(good->result().result.generated_ids.size(), 3u);
}

// --request-timeout's rule: a request met its deadline when its sequence finished at or before it, whenever the
// handler looks. A sequence that finished after the deadline — even one finished before its handler woke up — is
// a timeout (504); one that finished in time is answered normally even when the handler looks later.
TEST(ServeEngine, ADeadlineIsMetByWhenTheSequenceFinishedNotWhenItsHandlerLooks) {
  auto model = tiny_llama();
  Engine engine(*model, nullptr, EngineOptions{});
  auto s = engine.submit({1, 2, 3}, greedy(3));
  ASSERT_TRUE(s->wait_finished(Clock::now() + std::chrono::seconds(60)));
  const Clock::time_point done = s->finished_at();
  ASSERT_NE(done, Clock::time_point{});
  EXPECT_TRUE(s->wait_finished(done));                                // finished exactly at the deadline: in time
  EXPECT_TRUE(s->wait_finished(done + std::chrono::hours(1)));        // in time, looked at long after
  EXPECT_FALSE(s->wait_finished(done - std::chrono::nanoseconds(1)));  // finished after the deadline: too late
  std::string text;  // next() only waits: its deadline is a wake-up time, and a finished stream says so
  RequestStream::Wait w;
  while ((w = s->next(text, done - std::chrono::seconds(1))) == RequestStream::Wait::Text) {
  }
  EXPECT_EQ(w, RequestStream::Wait::Finished);
  EXPECT_EQ(s->result().result.generated_ids.size(), 3u);
}

}  // namespace
}  // namespace ferry::serve
