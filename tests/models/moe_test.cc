// Mixtures of experts (models/moe.h): the three families' configs as transformers 5.24 reads them, their module trees
// (checkpoint keys, class names), the router's math, and the sparse block against a dense computation of the same
// sum. The families against transformers itself: hf_reference_test.cc (mixtral_*, qwen2_moe_*, qwen3_moe_*).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/big_modeling/experts.h"
#include "ferry/big_modeling/module_sizes.h"
#include "ferry/io/staged_reader.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/llama.h"
#include "ferry/models/moe.h"
#include "ferry/nn/empty_weights.h"
#include "ferry/nn/hooks.h"
#include "ferry/nn/init.h"
#include "ferry/nn/module_tensors.h"
#include "ferry/ops/elementwise.h"
#include "support/error_of.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

using nlohmann::json;
using test::error_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ConfigJson cfg(const json& j) { return ConfigJson::from_json(j, "test/config.json"); }

json sizes() {
  return {{"vocab_size", 100},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 16}};
}

std::shared_ptr<CausalLM> build(const json& config, bool empty = true) {
  if (!empty) return AutoModelForCausalLM::from_config(cfg(config));
  auto guard = nn::init_empty_weights();
  return AutoModelForCausalLM::from_config(cfg(config));
}

// ---- configs ----------------------------------------------------------------------------------------------------

TEST(MoeConfig, MixtralDefaultsAsTransformers) {
  const LlamaConfig c = LlamaConfig::from_json(cfg(sizes()), kMixtralVariant);
  EXPECT_EQ(c.moe.num_experts, 8);  // num_local_experts
  EXPECT_EQ(c.moe.top_k, 2);
  EXPECT_EQ(c.moe.expert_intermediate_size, 128);  // intermediate_size
  EXPECT_TRUE(c.moe.norm_topk_prob);
  EXPECT_EQ(c.moe.shared_expert_intermediate_size, 0);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope.rope_theta, 1e6);
  EXPECT_THAT(c.sliding_window, ElementsAre(0, 0, 0, 0));  // None when absent, unlike Mistral's 4096
  EXPECT_EQ(c.feed_forward_name, "block_sparse_moe");
  EXPECT_THAT(c.sparse_layers, ElementsAre(true, true, true, true));
  json j = sizes();
  j["sliding_window"] = 16;
  j["rope_theta"] = 1e4;
  const LlamaConfig w = LlamaConfig::from_json(cfg(j), kMixtralVariant);
  EXPECT_THAT(w.sliding_window, ElementsAre(16, 16, 16, 16));
  EXPECT_DOUBLE_EQ(w.rope.rope_theta, 1e4);
}

TEST(MoeConfig, Qwen2MoeSparseLayersSharedExpertAndSlidingWindows) {
  LlamaConfig c = LlamaConfig::from_json(cfg(sizes()), kQwen2MoeVariant);
  EXPECT_EQ(c.moe.num_experts, 60);
  EXPECT_EQ(c.moe.top_k, 4);
  EXPECT_EQ(c.moe.expert_intermediate_size, 1408);
  EXPECT_EQ(c.moe.shared_expert_intermediate_size, 5632);
  EXPECT_FALSE(c.moe.norm_topk_prob);
  EXPECT_TRUE(c.qkv_bias);
  json j = sizes();
  j["decoder_sparse_step"] = 2;  // layers 1 and 3: (i + 1) % 2 == 0
  c = LlamaConfig::from_json(cfg(j), kQwen2MoeVariant);
  EXPECT_THAT(c.sparse_layers, ElementsAre(false, true, false, true));
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = {0, 2};
  c = LlamaConfig::from_json(cfg(j), kQwen2MoeVariant);
  EXPECT_THAT(c.sparse_layers, ElementsAre(false, true, false, true));
  // Qwen2MoeConfig.__post_init__: sliding on the even layers below max_window_layers.
  j["use_sliding_window"] = true;
  j["sliding_window"] = 8;
  j["max_window_layers"] = 3;
  EXPECT_THAT(LlamaConfig::from_json(cfg(j), kQwen2MoeVariant).sliding_window, ElementsAre(8, 0, 8, 0));
  j["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention", "full_attention"};
  EXPECT_THAT(LlamaConfig::from_json(cfg(j), kQwen2MoeVariant).sliding_window, ElementsAre(0, 8, 8, 0));
}

TEST(MoeConfig, Qwen3MoeReadsEitherExpertCountKey) {
  json j = sizes();
  LlamaConfig c = LlamaConfig::from_json(cfg(j), kQwen3MoeVariant);
  EXPECT_EQ(c.moe.num_experts, 128);
  EXPECT_EQ(c.moe.top_k, 8);
  EXPECT_EQ(c.moe.expert_intermediate_size, 768);
  EXPECT_EQ(c.head_dim, 4);  // hidden / heads, unlike Qwen3's 128
  EXPECT_TRUE(c.qk_norm);
  j["num_local_experts"] = 16;  // what save_pretrained writes (Qwen3MoeConfig.attribute_map)
  EXPECT_EQ(LlamaConfig::from_json(cfg(j), kQwen3MoeVariant).moe.num_experts, 16);
  j["num_experts"] = 32;  // the Hub's name wins when both are present
  EXPECT_EQ(LlamaConfig::from_json(cfg(j), kQwen3MoeVariant).moe.num_experts, 32);
  j["use_sliding_window"] = true;
  j["sliding_window"] = 8;
  EXPECT_THAT(LlamaConfig::from_json(cfg(j), kQwen3MoeVariant).sliding_window, ElementsAre(8, 8, 8, 8));
}

TEST(MoeConfig, BadExpertKeysAreErrorsNamingThem) {
  auto fails = [](const json& extra, const LlamaVariant& v) {
    json j = sizes();
    j.update(extra);
    return error_of([&] { LlamaConfig::from_json(cfg(j), v); });
  };
  EXPECT_THAT(fails({{"num_local_experts", 4}, {"num_experts_per_tok", 5}}, kMixtralVariant),
              HasSubstr("\"num_experts_per_tok\" (5) is more than the number of experts (\"num_local_experts\": 4)"));
  EXPECT_THAT(fails({{"num_experts", 0}}, kQwen2MoeVariant), HasSubstr("\"num_experts\" must be positive"));
  EXPECT_THAT(fails({{"num_experts_per_tok", 0}}, kQwen3MoeVariant), HasSubstr("\"num_experts_per_tok\""));
  EXPECT_THAT(fails({{"moe_intermediate_size", 0}}, kQwen3MoeVariant), HasSubstr("\"moe_intermediate_size\""));
  EXPECT_THAT(fails({{"mlp_only_layers", {4}}}, kQwen2MoeVariant), HasSubstr("\"mlp_only_layers\" lists 4"));
  EXPECT_THAT(fails({{"mlp_only_layers", "1"}}, kQwen2MoeVariant), HasSubstr("\"mlp_only_layers\" must be a list"));
  EXPECT_THAT(fails({{"decoder_sparse_step", 0}}, kQwen2MoeVariant), HasSubstr("\"decoder_sparse_step\""));
  EXPECT_THAT(fails({{"shared_expert_intermediate_size", -1}}, kQwen2MoeVariant),
              HasSubstr("\"shared_expert_intermediate_size\""));
}

// ---- module trees -----------------------------------------------------------------------------------------------

TEST(MoeArchitecture, MixtralExpertsUnderBlockSparseMoeWithTheCheckpointsNames) {
  auto m = build(test::tiny_mixtral_config());
  EXPECT_EQ(m->type_name(), "MixtralForCausalLM");
  EXPECT_EQ(m->info().block_class, "MixtralDecoderLayer");
  EXPECT_EQ(m->info().experts.num_experts, 6);
  EXPECT_EQ(m->info().experts.experts_per_token, 2);
  EXPECT_EQ(m->info().experts.sparse_layers, 2);
  EXPECT_EQ(m->info().experts.expert_class, "MixtralBlockSparseTop2MLP");
  EXPECT_EQ(m->get_submodule("model.layers.0.block_sparse_moe").type_name(), "MixtralSparseMoeBlock");
  EXPECT_EQ(m->get_submodule("model.layers.0.block_sparse_moe.gate").type_name(), "MixtralTopKRouter");
  EXPECT_EQ(m->get_submodule("model.layers.1.block_sparse_moe.experts.5").type_name(), "MixtralBlockSparseTop2MLP");
  EXPECT_EQ(nn::get_module_tensor(*m, "model.layers.0.block_sparse_moe.gate.weight").shape(), (Shape{6, 32}));
  EXPECT_EQ(nn::get_module_tensor(*m, "model.layers.0.block_sparse_moe.experts.3.w1.weight").shape(), (Shape{48, 32}));
  EXPECT_EQ(nn::get_module_tensor(*m, "model.layers.0.block_sparse_moe.experts.3.w3.weight").shape(), (Shape{48, 32}));
  EXPECT_EQ(nn::get_module_tensor(*m, "model.layers.0.block_sparse_moe.experts.3.w2.weight").shape(), (Shape{32, 48}));
  EXPECT_THROW(m->get_submodule("model.layers.0.block_sparse_moe.experts.6"), Error);
  EXPECT_THROW(m->get_submodule("model.layers.0.mlp"), Error);
}

TEST(MoeArchitecture, Qwen2MoeSharedExpertAndADenseLayer) {
  auto m = build(test::tiny_qwen2_moe_config());
  EXPECT_EQ(m->info().experts.sparse_layers, 2);  // layer 1 is in mlp_only_layers
  EXPECT_EQ(m->get_submodule("model.layers.0.mlp").type_name(), "Qwen2MoeSparseMoeBlock");
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp").type_name(), "Qwen2MoeMLP");
  EXPECT_EQ(nn::get_module_tensor(*m, "model.layers.1.mlp.gate_proj.weight").shape(), (Shape{48, 32}));
  EXPECT_EQ(nn::get_module_tensor(*m, "model.layers.2.mlp.experts.5.up_proj.weight").shape(), (Shape{16, 32}));
  EXPECT_EQ(nn::get_module_tensor(*m, "model.layers.2.mlp.shared_expert.down_proj.weight").shape(), (Shape{32, 24}));
  EXPECT_EQ(nn::get_module_tensor(*m, "model.layers.2.mlp.shared_expert_gate.weight").shape(), (Shape{1, 32}));
  EXPECT_EQ(m->get_submodule("model.layers.2.mlp.experts.0").type_name(), "Qwen2MoeMLP");
  EXPECT_EQ(nn::get_module_tensor(*m, "model.layers.0.self_attn.q_proj.bias").shape(), (Shape{32}));
}

TEST(MoeArchitecture, Qwen3MoeHasQueryKeyNormsAndNoSharedExpert) {
  auto m = build(test::tiny_qwen3_moe_config());
  EXPECT_EQ(m->get_submodule("model.layers.1.mlp").type_name(), "Qwen3MoeSparseMoeBlock");
  EXPECT_EQ(nn::get_module_tensor(*m, "model.layers.0.self_attn.q_norm.weight").shape(), (Shape{12}));
  EXPECT_THROW(m->get_submodule("model.layers.0.mlp.shared_expert"), Error);
  EXPECT_EQ(m->info().experts.expert_class, "Qwen3MoeMLP");
}

// ---- the router and the block -----------------------------------------------------------------------------------

TEST(RouteTokens, SoftmaxTopKAndNormalisationAsTransformers) {
  // token 0: logits 0, 1, 2, 3 -> experts 3, 2; token 1: a tie between experts 0 and 2 -> the lower first.
  const Tensor logits = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 5, 1, 5, 0}, {2, 4});
  const Routing r = route_tokens(logits, 2, /*normalize=*/false);
  EXPECT_THAT(r.experts, ElementsAre(3, 2, 0, 2));
  const double z = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(r.weights[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(r.weights[1], std::exp(2.0) / z, 1e-6);
  const Routing n = route_tokens(logits, 2, /*normalize=*/true);
  EXPECT_NEAR(n.weights[0], std::exp(3.0) / (std::exp(3.0) + std::exp(2.0)), 1e-6);
  EXPECT_NEAR(n.weights[2] + n.weights[3], 1.0, 1e-6);
  EXPECT_NEAR(n.weights[2], 0.5, 1e-6);
  EXPECT_THROW(route_tokens(logits, 5, true), Error);
  EXPECT_THROW(route_tokens(logits, 0, true), Error);
}

// Records which modules the block announced before running them.
class RecordingHook : public nn::ModelHook {
 public:
  explicit RecordingHook(std::vector<std::string>* log, std::string name) : log_(log), name_(std::move(name)) {}
  void will_run_soon(nn::Module&) override { log_->push_back("announce " + name_); }
  nn::Args pre_forward(nn::Module&, nn::Args args) override {
    log_->push_back("run " + name_);
    return args;
  }

 private:
  std::vector<std::string>* log_;
  std::string name_;
};

// The block's output is Σ_k w_k · expert_k(x) per token (+ the shared expert): computed here densely, every expert on
// every token, then picked by the routing. Only the routed experts run, each once, all announced before the first.
TEST(SparseMoeBlock, EqualsTheDenseSumOverTheRoutedExpertsAndRunsOnlyThose) {
  for (const bool shared : {false, true}) {
    MoeConfig c;
    c.class_prefix = "Qwen2Moe";
    c.expert_class = "Qwen2MoeMLP";
    c.hidden_size = 16;
    c.num_experts = 6;
    c.top_k = 2;
    c.expert_intermediate_size = 12;
    c.norm_topk_prob = !shared;
    c.shared_expert_intermediate_size = shared ? 20 : 0;
    nn::manual_seed(7);
    SparseMoeBlock block(c, DType::F32);  // drawn as PyTorch's Linear init draws
    const Tensor x = nn::make_tensor({5, 16}, DType::F32, Device::cpu(), nn::TensorInit::normal(0, 1));
    std::vector<std::string> log;
    for (int e = 0; e < 6; ++e)
      nn::add_hook_to_module((*block.experts)[static_cast<std::size_t>(e)],
                             std::make_shared<RecordingHook>(&log, std::to_string(e)));
    const Tensor got = block(x);

    const Routing r = route_tokens((*block.gate)(x), 2, c.norm_topk_prob);
    std::vector<float> want(5 * 16, 0.0f);
    std::set<int> routed;
    for (int64_t t = 0; t < 5; ++t) {
      for (int64_t k = 0; k < 2; ++k) {
        const int e = r.experts[static_cast<std::size_t>(t * 2 + k)];
        routed.insert(e);
        const std::vector<float> y = (*block.experts)[static_cast<std::size_t>(e)](x).to_vector<float>();
        for (int64_t j = 0; j < 16; ++j)
          want[static_cast<std::size_t>(t * 16 + j)] += r.weights[static_cast<std::size_t>(t * 2 + k)] *
                                                        y[static_cast<std::size_t>(t * 16 + j)];
      }
    }
    if (shared) {
      const std::vector<float> s = (*block.shared_expert)(x).to_vector<float>();
      const std::vector<float> g = (*block.shared_expert_gate)(x).to_vector<float>();
      for (int64_t t = 0; t < 5; ++t)
        for (int64_t j = 0; j < 16; ++j)
          want[static_cast<std::size_t>(t * 16 + j)] += s[static_cast<std::size_t>(t * 16 + j)] /
                                                        (1.0f + std::exp(-g[static_cast<std::size_t>(t)]));
    }
    const std::vector<float> g = got.to_vector<float>();
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-5) << "element " << i;

    // Each routed expert announced once, in ascending order, before the first runs; then each runs once.
    std::vector<std::string> expected;
    for (int e : routed) expected.push_back("announce " + std::to_string(e));
    for (int e : routed) expected.push_back("run " + std::to_string(e));
    EXPECT_EQ(std::vector<std::string>(log.begin(), log.begin() + static_cast<std::ptrdiff_t>(expected.size())),
              expected);
    EXPECT_EQ(block.use().calls, routed.size());
    EXPECT_EQ(block.use().tokens, 10u);
  }
}

// ---- planning and offload by the expert -------------------------------------------------------------------------

bool is_expert_name(const std::string& name) { return name.find(".experts.") != std::string::npos; }

// With experts as units, the dense parts go first: at a cpu budget between the dense size and the whole model, every
// dense tensor is on the cpu, the experts are split between cpu and disk, and those on disk follow those on the cpu in
// layer order. Accelerate's plan (no expert classes) at the same budget puts whole layers on disk instead.
TEST(MoePlan, ExpertsAreUnitsPlacedAfterTheDenseParts) {
  auto m = build(test::tiny_mixtral_config());
  const ModuleSizes sizes = compute_module_sizes(*m);
  int64_t dense = 0, expert = 0;
  for (const auto& [name, t] : m->named_parameters()) (is_expert_name(name) ? expert : dense) += t.nbytes();
  PlanOptions o;
  o.max_memory = MaxMemory::parse({{"cpu", std::to_string(dense + expert / 2)}, {"disk", "1000000000"}});
  o.no_split_module_classes = {"MixtralDecoderLayer"};
  o.expert_module_classes = {"MixtralBlockSparseTop2MLP"};
  const DeviceMap map = infer_auto_device_map(*m, o);
  bool seen_disk = false;
  int on_cpu = 0, on_disk = 0;
  for (const auto& [name, t] : m->named_parameters()) {
    const Device d = *map.device_for(name);
    if (!is_expert_name(name)) {
      EXPECT_TRUE(d.is_cpu()) << name << " on " << d.str();
      continue;
    }
    if (d.is_disk()) {
      seen_disk = true;
      ++on_disk;
    } else {
      EXPECT_FALSE(seen_disk) << name << ": an expert on the cpu after one on disk";
      ++on_cpu;
    }
    // an expert is never split between devices
    const std::string unit = name.substr(0, name.rfind('.', name.rfind('.') - 1));
    EXPECT_TRUE(map.device_for(unit + ".w1.weight") == map.device_for(unit + ".w2.weight")) << unit;
  }
  EXPECT_GT(on_cpu, 0);
  EXPECT_GT(on_disk, 0);

  o.expert_module_classes.clear();  // Accelerate's plan: whole layers
  const DeviceMap layers = infer_auto_device_map(*m, o);
  EXPECT_TRUE(layers.device_for("model.layers.1.self_attn.q_proj.weight")->is_disk());
  for (const auto& [name, d] : layers) EXPECT_FALSE(is_expert_name(name + ".")) << name;
}

// The dense parts on the cpu, every expert on disk.
DeviceMap experts_on_disk(const nn::Module& model) {
  DeviceMap map;
  map.set("lm_head", Device::cpu());  // tied or not
  for (const auto& [name, t] : model.named_parameters()) {
    if (!is_expert_name(name)) {
      map.set(name.substr(0, name.rfind('.')), Device::cpu());
      continue;
    }
    const std::size_t at = name.find(".experts.") + 9;
    map.set(name.substr(0, name.find('.', at)), Device::disk());
  }
  return map;
}

// Every expert on disk, read with direct reads, no prefetch and no expert cache: the logits equal the resident model's
// bit for bit, and each forward reads exactly the routed experts' three tensors (the dense parts stay on the cpu).
TEST(MoeOffload, ExpertsOnDiskAreReadOnlyWhenRoutedAndComputeTheResidentLogits) {
  for (const auto& [family, config] : {std::pair{std::string("mixtral"), test::tiny_mixtral_config()},
                                       {std::string("qwen2_moe"), test::tiny_qwen2_moe_config()},
                                       {std::string("qwen3_moe"), test::tiny_qwen3_moe_config()}}) {
    SCOPED_TRACE(family);
    test::TempDir dir;
    test::write_random_hf_folder(dir.path() / "model", config, DType::F32);
    auto resident = AutoModelForCausalLM::from_pretrained(dir.path() / "model");
    const DeviceMap map = experts_on_disk(*resident);
    auto reader = std::make_shared<io::StagedReader>();
    auto offloaded = AutoModelForCausalLM::from_pretrained(dir.path() / "model",
                                                           {.device_map = map,
                                                            .offload_folder = dir.path() / "offload",
                                                            .expert_cache_bytes = 0,
                                                            .prefetch = 0,
                                                            .offload_io = OffloadIo::Direct,
                                                            .staged_reader = reader});
    std::vector<SparseMoeBlock*> blocks;
    for (const auto& named : offloaded->named_modules())
      if (auto* b = dynamic_cast<SparseMoeBlock*>(named.module)) blocks.push_back(b);
    ASSERT_FALSE(blocks.empty());
    auto calls = [&] {
      uint64_t n = 0;
      for (auto* b : blocks) n += b->use().calls;
      return n;
    };

    const Tensor prompt = Tensor::from_vector(std::vector<int64_t>{3, 17, 5, 60, 2, 9, 41, 8}, {8});
    auto cache_r = resident->make_cache(), cache_o = offloaded->make_cache();
    std::vector<Tensor> want = {resident->logits(prompt, cache_r)};
    const uint64_t tensors0 = reader->stats().tensors, calls0 = calls();
    std::vector<Tensor> got = {offloaded->logits(prompt, cache_o)};
    EXPECT_EQ(reader->stats().tensors - tensors0, 3 * (calls() - calls0)) << "prefill";
    for (int64_t step = 0; step < 4; ++step) {
      const Tensor next = Tensor::from_vector(std::vector<int64_t>{(step * 31 + 7) % 96}, {1});
      want.push_back(resident->logits(next, cache_r));
      const uint64_t t0 = reader->stats().tensors, c0 = calls();
      got.push_back(offloaded->logits(next, cache_o));
      const uint64_t routed = calls() - c0;
      EXPECT_EQ(reader->stats().tensors - t0, 3 * routed) << "step " << step;
      const int64_t top_k = offloaded->info().experts.experts_per_token;
      EXPECT_EQ(routed, static_cast<uint64_t>(top_k * offloaded->info().experts.sparse_layers)) << "step " << step;
    }
    for (std::size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(test::max_abs_diff(got[i], want[i]), 0.0) << "forward " << i;
  }
}

// An expert cache that holds one expert's tensors evicts on every token: the logits stay bit-identical to the resident
// model's, every routed expert tensor is a miss read from disk, and evictions are counted. A cache that holds every
// expert serves a repeated token from RAM: no read at all.
TEST(MoeOffload, AnExpertCacheThatEvictsEveryTokenKeepsTheLogitsAndALargeOneReadsNothingTwice) {
  test::TempDir dir;
  test::write_random_hf_folder(dir.path() / "model", test::tiny_mixtral_config(), DType::F32);
  auto resident = AutoModelForCausalLM::from_pretrained(dir.path() / "model");
  const DeviceMap map = experts_on_disk(*resident);
  const int64_t one_expert =
      nn::get_module_tensor(*resident, "model.layers.0.block_sparse_moe.experts.0.w1.weight").nbytes() * 3;
  const Tensor prompt = Tensor::from_vector(std::vector<int64_t>{3, 17, 5, 60, 2, 9, 41, 8}, {8});
  const std::vector<int64_t> steps = {7, 38, 7, 7, 69, 4};

  auto run = [&](int64_t cache_bytes, const std::shared_ptr<ExpertCache>& cache,
                 const std::shared_ptr<io::StagedReader>& reader) {
    auto m = AutoModelForCausalLM::from_pretrained(dir.path() / "model", {.device_map = map,
                                                                          .offload_folder = dir.path() / "offload",
                                                                          .expert_cache_bytes = cache_bytes,
                                                                          .expert_cache = cache,
                                                                          .prefetch = 0,
                                                                          .offload_io = OffloadIo::Direct,
                                                                          .staged_reader = reader});
    auto kv = m->make_cache();
    std::vector<Tensor> out = {m->logits(prompt, kv)};
    for (int64_t id : steps) out.push_back(m->logits(Tensor::from_vector(std::vector<int64_t>{id}, {1}), kv));
    return out;
  };
  auto kv = resident->make_cache();
  std::vector<Tensor> want = {resident->logits(prompt, kv)};
  for (int64_t id : steps) want.push_back(resident->logits(Tensor::from_vector(std::vector<int64_t>{id}, {1}), kv));

  auto small = std::make_shared<ExpertCache>();
  auto reader = std::make_shared<io::StagedReader>();
  const std::vector<Tensor> got = run(one_expert, small, reader);
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(test::max_abs_diff(got[i], want[i]), 0.0) << "forward " << i;
  io::WeightsCacheStats s = small->stats();
  ASSERT_TRUE(small->map) << "experts on disk get a cache";
  EXPECT_EQ(s.capacity, static_cast<std::size_t>(one_expert));
  EXPECT_LE(s.bytes, static_cast<std::size_t>(one_expert));
  EXPECT_EQ(s.misses, reader->stats().tensors) << "every miss is one direct read, every read a miss";
  // The three tensors of an expert have one size: once the first expert filled the cache, every miss evicts one.
  EXPECT_EQ(s.evictions, s.misses - 3);
  EXPECT_GT(s.misses, 3u * static_cast<uint64_t>(steps.size()));

  auto large = std::make_shared<ExpertCache>();
  reader = std::make_shared<io::StagedReader>();
  const std::vector<Tensor> again = run(int64_t{1} << 30, large, reader);
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(test::max_abs_diff(again[i], want[i]), 0.0) << "forward " << i;
  s = large->stats();
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_EQ(s.misses, reader->stats().tensors);
  EXPECT_GT(s.hits, 0u) << "token 7 three times: its experts are read once";
  const int64_t experts = resident->info().experts.num_experts * resident->info().experts.sparse_layers;
  EXPECT_LE(s.misses, static_cast<uint64_t>(3 * experts)) << "no expert is read twice";
  EXPECT_EQ(s.bytes, s.bytes_missed);
}

// --expert-cache's default: what the plan leaves of the cpu budget, at most the experts on disk, none below one expert
// per layer.
TEST(MoePlan, TheDefaultExpertCacheIsTheCpuBudgetLeftAtMostTheExpertsOnDisk) {
  auto m = build(test::tiny_mixtral_config());  // 2 layers of 6 experts
  const DeviceMap map = experts_on_disk(*m);
  int64_t dense = 0, expert = 0;
  for (const auto& [name, t] : m->named_parameters()) (is_expert_name(name) ? expert : dense) += t.nbytes();
  const int64_t one = expert / 12;
  PlanOptions o;
  o.max_memory = MaxMemory::parse({{"cpu", std::to_string(dense + 3 * one + 10)}, {"disk", "1000000000"}});
  const std::vector<std::string> classes = {"MixtralBlockSparseTop2MLP"};
  EXPECT_EQ(default_expert_cache_bytes(*m, map, o, classes), 3 * one + 10);
  o.reservations.push_back({Device::cpu(), one + 10, "staging pool"});
  EXPECT_EQ(default_expert_cache_bytes(*m, map, o, classes), 2 * one) << "one expert per layer";
  o.reservations.push_back({Device::cpu(), 1, "KV cache"});
  EXPECT_EQ(default_expert_cache_bytes(*m, map, o, classes), 0) << "below one expert per layer: never a hit";
  o.max_memory = MaxMemory::parse({{"cpu", std::to_string(dense + 10 * expert)}, {"disk", "1000000000"}});
  EXPECT_EQ(default_expert_cache_bytes(*m, map, o, classes), expert) << "at most the experts on disk";
  EXPECT_EQ(default_expert_cache_bytes(*m, map, o, {}), 0) << "a dense model";
  DeviceMap all_cpu{{"", Device::cpu()}};
  EXPECT_EQ(default_expert_cache_bytes(*m, all_cpu, o, classes), 0) << "no expert on disk";
}

// auto's cache is reserved before experts are placed in RAM, up to a token's experts twice over: the routed experts of
// recent tokens are then kept instead of a fixed few (docs/benchmarks.md, issue 32).
TEST(MoePlan, AutoReservesACacheOfTwiceATokensExpertsWhenTheExpertsDoNotFit) {
  auto m = build(test::tiny_mixtral_config());  // 2 layers of 6 experts, top 2
  const std::vector<std::string> classes = {"MixtralBlockSparseTop2MLP"};
  int64_t experts = 0;
  for (const auto& [name, t] : m->named_parameters())
    if (is_expert_name(name)) experts += t.nbytes();
  const int64_t dense = compute_module_sizes(*m)[""] - experts;  // buffers included
  const int64_t one = experts / 12, working_set = 2 * one * 2;   // top 2 of each of 2 layers
  auto reservation = [&](int64_t room, std::vector<Reservation> reserved = {}) {
    PlanOptions o;
    o.max_memory = MaxMemory::parse({{"cpu", std::to_string(dense + room)}, {"disk", "1000000000"}});
    o.reservations = std::move(reserved);
    return expert_cache_reservation(*m, o, classes, 2);
  };
  EXPECT_EQ(reservation(experts), 0) << "everything fits: nothing is read from disk";
  EXPECT_EQ(reservation(11 * one), 2 * working_set) << "twice a token's experts";
  EXPECT_EQ(reservation(5 * one), 5 * one / 4 * 3) << "three quarters of the room at most";
  EXPECT_EQ(reservation(working_set - 1), (working_set - 1) / 4 * 3)
      << "below a token's experts: still a share per layer";
  EXPECT_EQ(reservation(2 * one - 1), 0) << "below one expert per layer the cache never hits";
  EXPECT_EQ(reservation(11 * one, {{Device::cpu(), 10 * one, "KV cache"}}), 0) << "other reservations come first";
  PlanOptions gpu;
  gpu.max_memory = MaxMemory::parse({{"0", "1000000"}, {"cpu", std::to_string(dense + 11 * one)}});
  EXPECT_EQ(expert_cache_reservation(*m, gpu, classes, 2), 0) << "GPU budgets are not modelled";
  PlanOptions cpu;
  cpu.max_memory = MaxMemory::parse({{"cpu", std::to_string(dense + 11 * one)}});
  EXPECT_EQ(expert_cache_reservation(*m, cpu, {}, 2), 0) << "a dense model";
}

}  // namespace
}  // namespace ferry::models

namespace ferry::models {
namespace {

// Guessing the next layer's experts (issue 32): with every expert on disk, read direct through a prefetcher, the
// guesses are counted whether or not they are read ahead, reading them ahead changes no logit, and the counts add up:
// every sparse layer but the first is guessed, and no more guesses are routed than were made or than experts ran.
TEST(MoeGuessing, GuessesStartReadsAndChangeNoLogit) {
  test::TempDir dir;
  nlohmann::json config = test::tiny_qwen3_moe_config();
  config["num_hidden_layers"] = 3;
  test::write_random_hf_folder(dir.path() / "model", config, DType::F32);
  auto resident = AutoModelForCausalLM::from_pretrained(dir.path() / "model");
  const DeviceMap map = experts_on_disk(*resident);
  const Tensor prompt = Tensor::from_vector(std::vector<int64_t>{3, 17, 5, 60, 2, 9, 41, 8}, {8});
  const std::vector<int64_t> steps = {7, 38, 69, 4, 12};
  auto run = [&](CausalLM& m) {
    auto kv = m.make_cache();
    std::vector<Tensor> out = {m.logits(prompt, kv)};
    for (int64_t id : steps) out.push_back(m.logits(Tensor::from_vector(std::vector<int64_t>{id}, {1}), kv));
    return out;
  };
  const std::vector<Tensor> want = run(*resident);
  for (bool guess : {true, false}) {
    SCOPED_TRACE(guess ? "reading guesses ahead" : "counting guesses only");
    auto reader = std::make_shared<io::StagedReader>();
    auto m = AutoModelForCausalLM::from_pretrained(dir.path() / "model", {.device_map = map,
                                                                          .offload_folder = dir.path() / "offload",
                                                                          .expert_cache_bytes = 0,
                                                                          .guess_experts = guess,
                                                                          .prefetch = 2,
                                                                          .offload_io = OffloadIo::Direct,
                                                                          .staged_reader = reader});
    const std::vector<Tensor> got = run(*m);
    for (std::size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(test::max_abs_diff(got[i], want[i]), 0.0) << "forward " << i;
    const ExpertUse use = expert_use(*m);
    const int64_t top_k = m->info().experts.experts_per_token, sparse = m->info().experts.sparse_layers;
    ASSERT_EQ(sparse, 3);
    EXPECT_EQ(use.calls >= static_cast<uint64_t>(top_k * sparse * static_cast<int64_t>(steps.size())), true);
    // Decode steps guess top_k experts for layers 1 and 2; the prompt guesses the union over its tokens.
    EXPECT_GE(use.guessed, static_cast<uint64_t>(top_k * (sparse - 1) * static_cast<int64_t>(steps.size())));
    EXPECT_LE(use.guessed_routed, use.guessed);
    EXPECT_LE(use.guessed_routed, use.calls);
    if (guess) {
      EXPECT_GT(reader->stats().prefetched + reader->stats().evicted, 0u) << "experts were read ahead";
    }
  }
}

// When a layer's input is the next layer's input (attention and experts add nothing) and both layers have one router,
// the guess is the routing: every routed expert of layers 1 and 2 was guessed, and every guess was routed.
TEST(MoeGuessing, ARouterSeeingTheSameInputGuessesEveryExpert) {
  test::TempDir dir;
  nlohmann::json config = test::tiny_qwen3_moe_config();
  config["num_hidden_layers"] = 3;
  test::write_random_hf_folder(dir.path() / "model", config, DType::F32);
  auto m = AutoModelForCausalLM::from_pretrained(dir.path() / "model");
  const Tensor router0 = nn::get_module_tensor(*m, "model.layers.0.mlp.gate.weight");
  for (const auto& [name, t] : m->named_parameters()) {  // new tensors: the loaded ones view the checkpoint
    if (name.ends_with("self_attn.o_proj.weight") || name.ends_with("down_proj.weight"))
      nn::set_module_tensor_to_device(*m, name, Device::cpu(), Tensor::zeros(t.shape(), DType::F32));
    else if (name.ends_with("mlp.gate.weight"))
      nn::set_module_tensor_to_device(*m, name, Device::cpu(), router0.clone());
  }
  set_expert_guessing(*m, true);
  auto kv = m->make_cache();
  m->logits(Tensor::from_vector(std::vector<int64_t>{3, 17, 5}, {3}), kv);
  const ExpertUse after_prompt = expert_use(*m);
  for (int64_t id : {7, 38, 69}) m->logits(Tensor::from_vector(std::vector<int64_t>{id}, {1}), kv);
  const ExpertUse use = expert_use(*m);
  const uint64_t calls = use.calls - after_prompt.calls, guessed = use.guessed - after_prompt.guessed;
  const uint64_t right = use.guessed_routed - after_prompt.guessed_routed;
  const auto top_k = static_cast<uint64_t>(m->info().experts.experts_per_token);
  EXPECT_EQ(calls, 3 * 3 * top_k);
  EXPECT_EQ(guessed, 3 * 2 * top_k) << "layers 1 and 2 are guessed, layer 0 is not";
  EXPECT_EQ(right, guessed);
  set_expert_guessing(*m, false);
  m->logits(Tensor::from_vector(std::vector<int64_t>{9}, {1}), kv);
  EXPECT_EQ(expert_use(*m).guessed, use.guessed) << "turned off";
}

}  // namespace
}  // namespace ferry::models
