// Planning a Llama-shaped skeleton (embed_tokens, N no-split decoder layers, norm, lm_head; built on meta) under
// many budgets: every plan covers every tensor, stays within budget, and obeys the reserve rule — the first GPU
// keeps room for the largest layer offloaded to the cpu or disk, and the cpu for the largest layer on disk.
// Also: the buffer fix, tied embeddings, KV-cache reservations.
#include <gtest/gtest.h>

#include <algorithm>

#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/embedding.h"
#include "ferry/nn/empty_weights.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/module_tensors.h"
#include "ferry/nn/norm.h"

namespace ferry {
namespace {

// Dimension legend: V vocabulary, D hidden, I intermediate, KV key/value width (heads × head_dim).
struct Dims {
  int64_t V = 512, D = 64, I = 160, KV = 32;
  int layers = 8;
  bool tie_embeddings = false;
};

class Named : public nn::Module {
 public:
  explicit Named(std::string type) : type_(std::move(type)) {}
  std::string type_name() const override { return type_; }

 private:
  std::string type_;
};

std::shared_ptr<nn::Module> decoder_layer(const Dims& d) {
  auto layer = std::make_shared<Named>("LlamaDecoderLayer");
  auto attn = layer->register_module("self_attn", std::make_shared<Named>("LlamaAttention"));
  attn->register_module("q_proj", std::make_shared<nn::Linear>(d.D, d.D, false));
  attn->register_module("k_proj", std::make_shared<nn::Linear>(d.D, d.KV, false));
  attn->register_module("v_proj", std::make_shared<nn::Linear>(d.D, d.KV, false));
  attn->register_module("o_proj", std::make_shared<nn::Linear>(d.D, d.D, false));
  auto mlp = layer->register_module("mlp", std::make_shared<Named>("LlamaMLP"));
  mlp->register_module("gate_proj", std::make_shared<nn::Linear>(d.D, d.I, false));
  mlp->register_module("up_proj", std::make_shared<nn::Linear>(d.D, d.I, false));
  mlp->register_module("down_proj", std::make_shared<nn::Linear>(d.I, d.D, false));
  layer->register_module("input_layernorm", std::make_shared<nn::RMSNorm>(d.D));
  layer->register_module("post_attention_layernorm", std::make_shared<nn::RMSNorm>(d.D));
  return layer;
}

std::shared_ptr<nn::Module> llama(const Dims& d) {
  auto guard = nn::init_empty_weights();
  auto root = std::make_shared<Named>("LlamaForCausalLM");
  auto model = root->register_module("model", std::make_shared<Named>("LlamaModel"));
  model->register_module("embed_tokens", std::make_shared<nn::Embedding>(d.V, d.D));
  auto layers = model->register_module("layers", std::make_shared<nn::ModuleList>());
  for (int i = 0; i < d.layers; ++i) layers->push_back(decoder_layer(d));
  model->register_module("norm", std::make_shared<nn::RMSNorm>(d.D));
  auto rotary = model->register_module("rotary_emb", std::make_shared<Named>("LlamaRotaryEmbedding"));
  rotary->register_buffer("inv_freq", Tensor::empty({d.D / 8}, DType::F32, Device::meta()), /*persistent=*/false);
  auto head = root->register_module("lm_head", std::make_shared<nn::Linear>(d.D, d.V, false));
  if (d.tie_embeddings) head->register_parameter("weight", model->get_submodule("embed_tokens").parameter_slot("weight"));
  return root;
}

// Checks coverage, budgets and the reserve rule for one plan. The rule is about layers (no-split blocks, leaves,
// tensors); a key may hold several (the rest of the queue lands on the last device unsplit), so each key counts its
// largest layer. A device that got nothing promises nothing (Accelerate logs it as "insufficient memory").
// Returns how many reserve-rule checks applied.
int expect_sound_plan(const nn::Module& model, const DeviceMap& map, const MaxMemory& budget, const PlanOptions& o) {
  SCOPED_TRACE(map.to_json());
  EXPECT_NO_THROW(check_device_map(model, map));
  for (const auto& [name, tensor] : nn::named_module_tensors(model, true, true))
    EXPECT_TRUE(map.device_for(name).has_value()) << name;
  ModuleSizes sizes = compute_module_sizes(model, o.dtype);
  MaxMemory usage = device_map_usage(model, map, o.dtype);
  for (const auto& e : usage.entries()) {
    if (!e.device.is_disk()) {
      EXPECT_LE(e.bytes, budget.get(e.device).value_or(0)) << e.device;
    }
  }
  auto largest_on = [&](auto pred) {
    int64_t largest = 0;
    for (const auto& [key, device] : map) {
      if (!pred(device)) continue;
      PlanItem item{key, key.empty() ? &model : model.find_submodule(key)};
      largest = std::max(largest, get_max_layer_size({item}, sizes, o.no_split_module_classes).size);
    }
    return largest;
  };
  int64_t offloaded = largest_on([](Device d) { return !d.is_accelerator(); });
  int64_t on_disk = largest_on([](Device d) { return d.is_disk(); });
  std::vector<Device> gpus = budget.accelerators();
  int checked = 0;
  if (!gpus.empty() && offloaded > 0 && usage.get(gpus[0]).value_or(0) > 0) {
    EXPECT_LE(*usage.get(gpus[0]) + offloaded, *budget.get(gpus[0])) << "reserve rule on " << gpus[0];
    ++checked;
  }
  if (budget.contains(Device::cpu()) && on_disk > 0 && usage.get(Device::cpu()).value_or(0) > 0) {
    EXPECT_LE(*usage.get(Device::cpu()) + on_disk, *budget.get(Device::cpu())) << "reserve rule on cpu";
    ++checked;
  }
  return checked;
}

TEST(LlamaSkeleton, IsMetaAndSizedLikeTheCheckpoint) {
  Dims d;
  auto model = llama(d);
  for (const auto& [name, t] : model->named_parameters()) EXPECT_TRUE(t.is_meta()) << name;
  ModuleSizes sizes = compute_module_sizes(*model, DType::BF16);
  int64_t layer = 2 * (2 * d.D * d.D + 2 * d.D * d.KV + 3 * d.D * d.I + 2 * d.D);
  EXPECT_EQ(sizes["model.layers.0"], layer);
  // inv_freq is f32 and counts min(bf16, f32) = 2 bytes per element.
  EXPECT_EQ(sizes.total(), 2 * (2 * d.V * d.D + d.D) + d.layers * layer + (d.D / 8) * 2);
}

TEST(LlamaSkeleton, ReserveRuleHoldsUnderManyBudgets) {
  for (bool tied : {false, true}) {
    Dims d;
    d.tie_embeddings = tied;
    auto model = llama(d);
    PlanOptions o;
    o.no_split_module_classes = {"LlamaDecoderLayer"};
    o.dtype = DType::BF16;
    o.clean_result = false;
    const int64_t total = compute_module_sizes(*model, o.dtype).total();
    int plans = 0, with_cpu = 0, with_disk = 0, rules = 0;
    for (double g0 : {0.05, 0.2, 0.45, 0.7, 1.1}) {
      for (double g1 : {0.0, 0.3}) {
        for (double cpu : {0.0, 0.15, 0.5, 2.0}) {
          MaxMemory budget;
          budget.set(Device::cuda(0), static_cast<int64_t>(total * g0));
          if (g1 > 0) budget.set(Device::cuda(1), static_cast<int64_t>(total * g1));
          if (cpu > 0) budget.set(Device::cpu(), static_cast<int64_t>(total * cpu));
          o.max_memory = budget;
          SCOPED_TRACE(budget.describe() + (tied ? " tied" : ""));
          ScopedLogCapture quiet;
          DeviceMap map = infer_auto_device_map(*model, o);
          rules += expect_sound_plan(*model, map, budget, o);
          ++plans;
          for (Device dev : map.devices()) {
            with_cpu += dev.is_cpu();
            with_disk += dev.is_disk();
          }
          // Decoder layers are never split.
          for (const auto& [key, device] : map)
            EXPECT_EQ(key.find("model.layers.") == 0 && std::count(key.begin(), key.end(), '.') > 2, false) << key;
        }
      }
    }
    EXPECT_EQ(plans, 40);
    EXPECT_GT(with_cpu, 5);  // the grid really exercises offloading
    EXPECT_GT(with_disk, 5);
    EXPECT_GT(rules, 10);
  }
}

TEST(LlamaSkeleton, BigBudgetPutsEverythingOnGpuZero) {
  auto model = llama(Dims{});
  PlanOptions o;
  o.max_memory = MaxMemory{{Device::cuda(0), 1LL << 30}, {Device::cpu(), 1LL << 30}};
  o.no_split_module_classes = {"LlamaDecoderLayer"};
  EXPECT_EQ(infer_auto_device_map(*model, o), DeviceMap({{"", Device::cuda(0)}}));
}

TEST(LlamaSkeleton, TiedEmbeddingsStayTogether) {
  Dims d;
  d.tie_embeddings = true;
  auto model = llama(d);
  PlanOptions o;
  o.no_split_module_classes = {"LlamaDecoderLayer"};
  o.dtype = DType::BF16;
  int64_t total = compute_module_sizes(*model, o.dtype).total();
  for (double frac : {0.1, 0.3, 0.6}) {
    o.max_memory = MaxMemory{{Device::cuda(0), static_cast<int64_t>(total * frac)}, {Device::cpu(), total}};
    DeviceMap map = infer_auto_device_map(*model, o);
    EXPECT_EQ(map.device_for("lm_head.weight"), map.device_for("model.embed_tokens.weight")) << map;
  }
}

TEST(LlamaSkeleton, KvCacheReservationShrinksWhatGpuZeroHolds) {
  Dims d;
  auto model = llama(d);
  PlanOptions o;
  o.no_split_module_classes = {"LlamaDecoderLayer"};
  o.dtype = DType::BF16;
  o.clean_result = false;
  int64_t total = compute_module_sizes(*model, o.dtype).total();
  MaxMemory budget{{Device::cuda(0), total / 2}, {Device::cpu(), total}};
  o.max_memory = budget;
  MaxMemory without = device_map_usage(*model, infer_auto_device_map(*model, o), o.dtype);

  // KV cache: 2 (k and v) × layers × KV width × context × 2 bytes (bf16).
  const int64_t context = 64, kv_cache = 2 * d.layers * d.KV * context * 2;
  o.reservations = {{Device::cuda(0), kv_cache, "KV cache for 64 tokens"}};
  DeviceMap map = infer_auto_device_map(*model, o);
  MaxMemory with = device_map_usage(*model, map, o.dtype);
  EXPECT_LT(*with.get(Device::cuda(0)), *without.get(Device::cuda(0)));
  EXPECT_LE(*with.get(Device::cuda(0)) + kv_cache, *budget.get(Device::cuda(0)));
  MaxMemory effective{{Device::cuda(0), total / 2 - kv_cache}, {Device::cpu(), total}};
  expect_sound_plan(*model, map, effective, o);
}

TEST(LlamaSkeleton, ModesStaySound) {
  auto model = llama(Dims{});
  PlanOptions o;
  o.no_split_module_classes = {"LlamaDecoderLayer"};
  o.clean_result = false;
  int64_t total = compute_module_sizes(*model).total();
  MaxMemory budget{{Device::cuda(0), total / 3}, {Device::cuda(1), total / 3}, {Device::cuda(2), total / 2},
                   {Device::cpu(), total}};
  o.max_memory = budget;
  ScopedLogCapture quiet;
  for (auto mode : {DeviceMapMode::Auto, DeviceMapMode::Balanced, DeviceMapMode::BalancedLow0,
                    DeviceMapMode::Sequential}) {
    SCOPED_TRACE(std::string(device_map_mode_name(mode)));
    DeviceMap map = plan_device_map(*model, mode, o);
    expect_sound_plan(*model, map, budget, o);
  }
  // balanced_low_0 leaves GPU 0 as empty as the others allow.
  MaxMemory low0 = device_map_usage(*model, plan_device_map(*model, DeviceMapMode::BalancedLow0, o));
  MaxMemory seq = device_map_usage(*model, plan_device_map(*model, DeviceMapMode::Sequential, o));
  EXPECT_LT(low0.get(Device::cuda(0)).value_or(0), seq.get(Device::cuda(0)).value_or(0));
}

TEST(BufferFix, ASplitKeepsTheModulesDirectBuffers) {
  // Root(block(a, b, buffer inv_freq), head). Accelerate splits block into [a, b] and never places inv_freq
  // (#3956, #4014): its raw plan is {"block.a": 0, "block.b": 0, "head": 0}. ferry queues the buffer after the
  // children, so it gets a device.
  auto root = std::make_shared<Named>("Root");
  auto block = root->register_module("block", std::make_shared<Named>("Block"));
  block->register_module("a", std::make_shared<nn::Linear>(8, 8));
  block->register_module("b", std::make_shared<nn::Linear>(8, 8));
  block->register_buffer("inv_freq", Tensor::zeros({16}, DType::F32), /*persistent=*/false);
  root->register_module("head", std::make_shared<nn::Linear>(8, 8));
  PlanOptions o;
  o.max_memory = MaxMemory{{Device::cuda(0), 900}, {Device::cpu(), 2000}};
  DeviceMap map = infer_auto_device_map(*root, o);
  EXPECT_EQ(map, DeviceMap::from_json(R"({"block.a": 0, "block.b": 0, "block.inv_freq": "cpu", "head": "cpu"})"));
  EXPECT_TRUE(map.device_for("block.inv_freq").has_value());
  EXPECT_NO_THROW(check_device_map(*root, map));
}

TEST(BufferFix, PersistentBuffersOfSplitModulesAreCovered) {
  auto root = std::make_shared<Named>("Root");
  auto block = root->register_module("block", std::make_shared<Named>("Block"));
  block->register_module("a", std::make_shared<nn::Linear>(16, 16));
  block->register_module("b", std::make_shared<nn::Linear>(16, 16));
  block->register_buffer("scale", Tensor::zeros({4}, DType::F32));  // persistent: in the state_dict
  PlanOptions o;
  o.max_memory = MaxMemory{{Device::cuda(0), 1500}, {Device::cpu(), 1500}};
  DeviceMap map = infer_auto_device_map(*root, o);
  EXPECT_TRUE(map.device_for("block.scale").has_value()) << map;
  EXPECT_NO_THROW(check_device_map(*root, map));
}

}  // namespace
}  // namespace ferry
