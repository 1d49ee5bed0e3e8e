// Models with bf16 weights on AMX (issue 39): every family reaches the AMX kernels through ops::linear, with no code
// of its own. Against the AVX-512 BF16 kernels (the same rounding of x, sums in another order): greedy ids equal and
// logits within kLogitTol of the largest logit, for a dense family, a mixture of experts and T5; resident and offloaded
// (layers on disk) give the same bits, as the kernels read the weights as they lie; and under AMX a sequence decoded in
// a batch gets the logits it gets alone, bit for bit; quantized weights (the AMX int8 GEMM) against AVX-512 VNNI.
// Skipped, saying so, on CPUs without AMX.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "ferry/core/cpu_features.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/kv_cache.h"
#include "ferry/models/seq2seq_lm.h"
#include "ferry/nn/init.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

// x rounded to bf16 before every linear layer turns a one-ulp difference of f32 sums into a bf16 ulp (2⁻⁸) of an input
// of the next layer whenever it crosses a rounding boundary; through a few tiny layers that stays below 1 % of the
// largest logit (measured: at most ~2e-3 on these folders).
constexpr double kLogitTol = 1e-2;

#define SKIP_WITHOUT_AMX() \
  if (!cpu_supports(Isa::AMX)) GTEST_SKIP() << "this CPU does not run AMX tiles " << amx_unavailable_reason()

struct Trace {
  std::vector<int64_t> ids;
  std::vector<std::vector<float>> logits;
};

Tensor prompt() { return Tensor::from_vector(std::vector<int64_t>{3, 14, 15, 92, 65, 35, 89, 7, 1, 44, 2}, {11}); }

int64_t argmax(const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); }

Trace greedy(CausalLM& model, const Tensor& ids, int steps = 5) {
  Trace r;
  auto cache = model.make_cache();
  auto logits = model.logits(ids, cache, 1).to_vector<float>();
  for (int i = 0; i <= steps; ++i) {
    r.logits.push_back(logits);
    r.ids.push_back(argmax(logits));
    if (i == steps) break;
    logits = model.logits(Tensor::from_vector(std::vector<int64_t>{r.ids.back()}, {1}), cache, 1).to_vector<float>();
  }
  return r;
}

void expect_close(const Trace& want, const Trace& got, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(want.ids, got.ids);
  for (std::size_t s = 0; s < want.logits.size(); ++s) {
    double scale = 0, diff = 0;
    for (std::size_t i = 0; i < want.logits[s].size(); ++i) {
      scale = std::max(scale, std::abs(double(want.logits[s][i])));
      diff = std::max(diff, std::abs(double(want.logits[s][i]) - got.logits[s][i]));
    }
    EXPECT_LE(diff, kLogitTol * scale) << "step " << s;
  }
}

Trace with_isa(Isa isa, CausalLM& model, const Tensor& ids = prompt()) {
  ScopedIsa scoped(isa);
  return greedy(model, ids);
}

// The decoder layers on disk (read at each forward into the staging pool), the rest on the cpu.
DeviceMap layers_on_disk() {
  return {{"model.embed_tokens", Device::cpu()},
          {"model.layers", Device::disk()},
          {"model.norm", Device::cpu()},
          {"lm_head", Device::cpu()}};
}

TEST(AmxModels, DecoderFamiliesMatchAvx512ResidentAndOffloaded) {
  SKIP_WITHOUT_AMX();
  for (const auto& [name, config] :
       {std::pair{"llama", test::tiny_llama_config()}, std::pair{"qwen3_moe", test::tiny_qwen3_moe_config()},
        std::pair{"gemma3", test::tiny_gemma3_config()}}) {
    SCOPED_TRACE(name);
    test::TempDir dir, offload("ferry-offload");
    nn::manual_seed(11);
    test::write_random_hf_folder(dir.path(), config, DType::BF16);
    auto resident = AutoModelForCausalLM::from_pretrained(dir.path());
    const Trace avx512 = with_isa(Isa::AVX512, *resident), amx = with_isa(Isa::AMX, *resident);
    expect_close(avx512, amx, "amx vs avx512, resident");
    // Layers on disk (read at each forward into the staging pool): the AMX path reads them as they arrive.
    auto offloaded = AutoModelForCausalLM::from_pretrained(dir.path(), {.device_map = layers_on_disk(),
                                                                        .offload_folder = offload.path(),
                                                                        .prefetch = 2});
    const Trace amx_offloaded = with_isa(Isa::AMX, *offloaded);
    EXPECT_EQ(amx.ids, amx_offloaded.ids);
    EXPECT_EQ(amx.logits, amx_offloaded.logits);  // the same kernels on the same values: the same bits
  }
}

// Quantized weights (quantized at load, as GGUF files hold them): a prompt of 40 tokens takes the AMX int8 GEMM
// (kQgAmxMinRows) for every type but q6_k, decode the AVX-512 VNNI GEMV on both. The integer sums are exact on both
// ISAs and only the f32 order of the scaled group sums differs (the two GEMMs' outputs differ by ~2e-7 of their
// largest), but a last-bit difference of an input to the next layer's 8-bit quantization can move one level: q5_0
// here measured 4.5e-3 of the largest logit, the others below 1e-4. Hence kLogitTol, as for bf16.
TEST(AmxModels, QuantizedWeightsMatchAvx512ResidentAndOffloaded) {
  SKIP_WITHOUT_AMX();
  nlohmann::json config = test::tiny_llama_config();
  config["hidden_size"] = 256;  // whole 256-element blocks for the K-quants
  config["intermediate_size"] = 512;
  test::TempDir dir;
  nn::manual_seed(13);
  test::write_random_hf_folder(dir.path(), config);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 40; ++i) ids.push_back((11 * i + 5) % 95 + 1);
  const Tensor long_prompt = Tensor::from_vector(ids, {40});
  for (DType dt :
       {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    test::TempDir offload("ferry-offload");
    auto resident = AutoModelForCausalLM::from_pretrained(dir.path(), {.quantize = dt});
    const Trace amx = with_isa(Isa::AMX, *resident, long_prompt);
    expect_close(with_isa(Isa::AVX512, *resident, long_prompt), amx, "amx vs avx512, resident");
    auto offloaded = AutoModelForCausalLM::from_pretrained(
        dir.path(), {.device_map = layers_on_disk(), .quantize = dt, .offload_folder = offload.path(), .prefetch = 2});
    const Trace amx_offloaded = with_isa(Isa::AMX, *offloaded, long_prompt);
    EXPECT_EQ(amx.ids, amx_offloaded.ids);
    EXPECT_EQ(amx.logits, amx_offloaded.logits);
  }
}

TEST(AmxModels, BatchedDecodeEqualsEachSequenceAlone) {
  SKIP_WITHOUT_AMX();
  ScopedIsa isa(Isa::AMX);
  test::TempDir dir;
  nn::manual_seed(12);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config(), DType::BF16);
  auto model = AutoModelForCausalLM::from_pretrained(dir.path());
  // 20 sequences (two blocks of 16 rows of x in the batched steps, one alone), prompts of 1-4 tokens, then 3 steps
  // fed with fixed tokens: every step's logits of each sequence against the same sequence run alone.
  const int64_t n = 20;
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> p;
    for (int64_t k = 0; k <= i % 4; ++k) p.push_back((7 * i + 3 * k + 1) % 90 + 1);
    prompts.push_back(p);
  }
  std::vector<std::shared_ptr<KvCache>> caches;
  std::vector<int64_t> ids;
  std::vector<KvCacheBatch::Sequence> seqs;
  for (const auto& p : prompts) {
    caches.push_back(model->make_cache());
    ids.insert(ids.end(), p.begin(), p.end());
    seqs.push_back({caches.back(), static_cast<int64_t>(p.size())});
  }
  std::vector<std::vector<float>> batched;  // [step][seq · V + v]
  batched.push_back(model->logits(Tensor::from_vector(ids, {static_cast<int64_t>(ids.size())}), KvCacheBatch(seqs), 1)
                        .to_vector<float>());
  for (int step = 0; step < 3; ++step) {
    std::vector<int64_t> next;
    std::vector<KvCacheBatch::Sequence> one;
    for (int64_t i = 0; i < n; ++i) next.push_back((i + 5 * step) % 90 + 2), one.push_back({caches[i], 1});
    batched.push_back(model->logits(Tensor::from_vector(next, {n}), KvCacheBatch(one), 1).to_vector<float>());
  }
  const int64_t V = static_cast<int64_t>(batched[0].size()) / n;
  for (int64_t i = 0; i < n; ++i) {
    SCOPED_TRACE(testing::Message() << "sequence " << i);
    auto cache = model->make_cache();
    const auto& p = prompts[static_cast<std::size_t>(i)];
    auto alone = model->logits(Tensor::from_vector(p, {static_cast<int64_t>(p.size())}), cache, 1).to_vector<float>();
    for (int step = 0; step <= 3; ++step) {
      const std::vector<float> row(batched[step].begin() + i * V, batched[step].begin() + (i + 1) * V);
      EXPECT_EQ(row, alone) << "step " << step;
      if (step == 3) break;
      alone = model->logits(Tensor::from_vector(std::vector<int64_t>{(i + 5 * step) % 90 + 2}, {1}), cache, 1)
                  .to_vector<float>();
    }
  }
}

TEST(AmxModels, T5MatchesAvx512) {
  SKIP_WITHOUT_AMX();
  test::TempDir dir;
  nn::manual_seed(13);
  test::write_random_seq2seq_folder(dir.path(), test::tiny_t5_config(), DType::BF16);
  auto model = AutoModelForSeq2SeqLM::from_pretrained(dir.path());
  auto run = [&](Isa isa) {
    ScopedIsa scoped(isa);
    Trace r;
    const Tensor enc = model->encode(prompt());
    auto cache = model->make_cache();
    int64_t next = model->model_info().decoder_start_token_id;
    for (int step = 0; step < 5; ++step) {
      r.logits.push_back(
          model->decode(Tensor::from_vector(std::vector<int64_t>{next}, {1}), enc, cache, 1).to_vector<float>());
      next = argmax(r.logits.back());
      r.ids.push_back(next);
    }
    return r;
  };
  expect_close(run(Isa::AVX512), run(Isa::AMX), "t5 amx vs avx512");
}

}  // namespace
}  // namespace ferry::models
