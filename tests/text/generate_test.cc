// The generate loop: greedy generation equals a hand-written argmax loop over the same model, streaming pieces add
// up to the text, stop criteria end it, and a dispatched (offloaded) model generates the same tokens.
#include "ferry/text/generate.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "ferry/big_modeling/dispatch.h"
#include "ferry/core/backend.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/kv_cache.h"
#include "ferry/nn/init.h"
#include "ferry/text/sampling.h"
#include "tiny_tokenizer.h"

namespace ferry::text {
namespace {

std::shared_ptr<models::CausalLM> tiny_llama() {
  nn::manual_seed(11);
  nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 32},
                           {"intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                           {"num_key_value_heads", 2}, {"vocab_size", 10}, {"max_position_embeddings", 64}};
  return models::AutoModelForCausalLM::from_config(models::ConfigJson::from_json(config), DType::F32);
}

Tokenizer tiny_tokenizer() { return Tokenizer::from_json(testing::tiny_tokenizer_json().dump()); }

TEST(Generate, GreedyEqualsAnArgmaxLoop) {
  auto model = tiny_llama();
  const std::vector<TokenId> prompt{1, 2, 3};
  GenerateOptions o;
  o.stop.max_new_tokens = 8;
  o.record_logits = 3;
  GenerateResult r = generate(*model, nullptr, prompt, o);
  ASSERT_EQ(r.generated_ids.size(), 8u);
  EXPECT_EQ(r.stop_reason, StopReason::MaxNewTokens);
  ASSERT_EQ(r.step_logits.size(), 3u);

  auto cache = model->make_cache();
  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  Tensor logits = model->logits(Tensor::from_vector(ids, {3}), cache, 1);
  for (std::size_t step = 0; step < 8; ++step) {
    std::vector<float> row = logits.to_vector<float>();
    if (step < 3) {
      EXPECT_EQ(row, r.step_logits[step]) << step;
    }
    const TokenId next = argmax(row);
    EXPECT_EQ(next, r.generated_ids[step]) << step;
    logits = model->logits(Tensor::from_vector<int64_t>({next}, {1}), cache, 1);
  }
  EXPECT_EQ(r.timings.prompt_tokens, 3u);
  EXPECT_EQ(r.timings.generated_tokens, 8u);
}

TEST(Generate, StreamedPiecesMakeTheTextAndEosStops) {
  auto model = tiny_llama();
  Tokenizer tok = tiny_tokenizer();
  GenerateOptions o;
  o.stop.max_new_tokens = 6;
  std::string streamed;
  std::vector<TokenId> seen;
  GenerateResult r = generate(*model, tok, "abcd", o, [&](std::string_view piece, TokenId id) {
    streamed += piece;
    seen.push_back(id);
    return true;
  });
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(seen, r.generated_ids);
  EXPECT_EQ(r.prompt_ids, tok.encode("abcd"));

  // The first generated token as EOS: generation stops right there.
  GenerateOptions eos = o;
  eos.stop.eos_token_ids = {r.generated_ids[0]};
  GenerateResult stopped = generate(*model, tok, "abcd", eos);
  EXPECT_EQ(stopped.generated_ids.size(), 1u);
  EXPECT_EQ(stopped.stop_reason, StopReason::EosToken);

  // The callback can stop it too.
  GenerateResult two = generate(*model, tok, "abcd", o, [n = 0](std::string_view, TokenId) mutable { return ++n < 2; });
  EXPECT_EQ(two.generated_ids.size(), 2u);
}

// Sampling at a high temperature over a Llama-2-style vocabulary with byte fallback emits byte runs that break off
// mid-character, after text was shown. Generation never fails on them, and the streamed pieces (the last one sent
// with kEndOfText) add up to decode(generated ids).
TEST(Generate, StreamingByteFallbackRunsNeverFailsAndAddsUpToTheDecode) {
  const Tokenizer tok = Tokenizer::from_json(testing::sentencepiece_json(testing::llama2_decoder()).dump());
  nn::manual_seed(5);
  nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 16},
                           {"intermediate_size", 32}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                           {"num_key_value_heads", 1}, {"vocab_size", tok.vocab_size()}, {"max_position_embeddings", 64}};
  auto model = models::AutoModelForCausalLM::from_config(models::ConfigJson::from_json(config), DType::F32);
  int runs_with_bytes = 0, held_at_end = 0;
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    GenerateOptions o;
    o.stop.max_new_tokens = 24;
    o.sampling = {.do_sample = true, .temperature = 8.0f, .top_k = 0, .seed = seed};
    std::string streamed;
    GenerateResult r;
    ASSERT_NO_THROW(r = generate(*model, tok, "the", o, [&](std::string_view piece, TokenId id) {
      streamed += piece;
      if (id == kEndOfText) ++held_at_end;
      return true;
    }));
    EXPECT_EQ(streamed, r.text) << seed;
    EXPECT_EQ(r.text, tok.decode(r.generated_ids, /*skip_special_tokens=*/true)) << seed;
    runs_with_bytes += std::any_of(r.generated_ids.begin(), r.generated_ids.end(), [](TokenId id) { return id >= 3 && id < 259; });
  }
  EXPECT_GT(runs_with_bytes, 50);  // the case under test really happened
  EXPECT_GT(held_at_end, 0);       // and some runs ended inside a byte run
}

TEST(Generate, AStopStringInTextHeldToTheEndStillStops) {
  const Tokenizer tok = Tokenizer::from_json(testing::sentencepiece_json(testing::llama2_decoder()).dump());
  StopChecker stop({.stop_strings = {"\xC3\xA9"}, .max_new_tokens = 8});
  DecodeStream stream(tok);
  const TokenId sp_a = *tok.token_to_id(testing::kSp + "a");
  EXPECT_EQ(stop.push(sp_a, stream.step(sp_a).value_or("")).text, "a");
  EXPECT_EQ(stop.push(3 + 0xC3, stream.step(3 + 0xC3).value_or("")).text, "");
  EXPECT_EQ(stop.push(3 + 0xA9, stream.step(3 + 0xA9).value_or("")).text, "");
  auto tail = stop.finish(stream.finish());
  EXPECT_EQ(tail.text, "");
  EXPECT_EQ(tail.reason, StopReason::StopString);
  EXPECT_EQ(stop.finish("more").text, "");  // nothing after a stop string
}

TEST(Generate, BadPromptsAreErrors) {
  auto model = tiny_llama();
  EXPECT_THROW(generate(*model, nullptr, std::vector<TokenId>{}), Error);
  EXPECT_THROW(generate(*model, nullptr, std::vector<TokenId>{10}), Error);  // vocab is 10
}

TEST(Generate, SameTokensOnAnyDeviceMap) {
  enable_virtual_devices({.count = 2, .capacity_bytes = 64 << 20});
  auto resident = tiny_llama();
  GenerateOptions o;
  o.stop.max_new_tokens = 6;
  const std::vector<TokenId> prompt{4, 5, 6, 7};
  GenerateResult want = generate(*resident, nullptr, prompt, o);
  auto model = tiny_llama();  // same seed, same weights
  DeviceMap map{{"model.embed_tokens", Device::cpu()},   {"model.layers.0", Device::virt(0)},
                {"model.layers.1", Device::virt(1)},     {"model.norm", Device::cpu()},
                {"model.rotary_emb", Device::virt(0)},   {"lm_head", Device::cpu()}};
  DispatchOptions d;
  d.main_device = Device::virt(0);
  d.skip_keys = {"past_key_values"};
  dispatch_model(*model, map, d);
  GenerateResult got = generate(*model, nullptr, prompt, o);
  EXPECT_EQ(got.generated_ids, want.generated_ids);
  disable_virtual_devices();
}

}  // namespace
}  // namespace ferry::text
