// Planning cost on 100B-parameter meta models (DESIGN.md: "planning a 1000-layer, 100B-parameter meta model must
// take well under a second"). Models are built once under init_empty_weights (no tensor bytes); each iteration
// plans from scratch.
//
//   Linear1000  1000 × Linear(10000, 10000) in a Sequential (Accelerate's test_init_empty_weights_very_large_model)
//   Llama1000   embed + 1000 no-split decoder layers (D 2560, I 10240: 105M parameters each) + norm + lm_head
//
// Run: build-*/bench/bench_planning --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <memory>

#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/core/logging.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/embedding.h"
#include "ferry/nn/empty_weights.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/norm.h"

namespace {

using namespace ferry;

constexpr int64_t kGiB = int64_t(1) << 30;

class Named : public nn::Module {
 public:
  explicit Named(std::string type) : type_(std::move(type)) {}
  std::string type_name() const override { return type_; }

 private:
  std::string type_;
};

const nn::Module& linear1000() {
  static std::shared_ptr<nn::Module> model = [] {
    auto guard = nn::init_empty_weights();
    auto seq = std::make_shared<nn::Sequential>();
    for (int i = 0; i < 1000; ++i) seq->push_back(std::make_shared<nn::Linear>(10000, 10000));
    return std::shared_ptr<nn::Module>(seq);
  }();
  return *model;
}

const nn::Module& llama1000() {
  static std::shared_ptr<nn::Module> model = [] {
    const int64_t V = 32000, D = 2560, I = 10240;
    auto guard = nn::init_empty_weights();
    auto root = std::make_shared<Named>("LlamaForCausalLM");
    auto inner = root->register_module("model", std::make_shared<Named>("LlamaModel"));
    inner->register_module("embed_tokens", std::make_shared<nn::Embedding>(V, D, DType::BF16));
    auto layers = inner->register_module("layers", std::make_shared<nn::ModuleList>());
    for (int i = 0; i < 1000; ++i) {
      auto layer = std::make_shared<Named>("LlamaDecoderLayer");
      auto attn = layer->register_module("self_attn", std::make_shared<Named>("LlamaAttention"));
      for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"})
        attn->register_module(p, std::make_shared<nn::Linear>(D, D, false, DType::BF16));
      auto mlp = layer->register_module("mlp", std::make_shared<Named>("LlamaMLP"));
      mlp->register_module("gate_proj", std::make_shared<nn::Linear>(D, I, false, DType::BF16));
      mlp->register_module("up_proj", std::make_shared<nn::Linear>(D, I, false, DType::BF16));
      mlp->register_module("down_proj", std::make_shared<nn::Linear>(I, D, false, DType::BF16));
      layer->register_module("input_layernorm", std::make_shared<nn::RMSNorm>(D, 1e-6, DType::BF16));
      layer->register_module("post_attention_layernorm", std::make_shared<nn::RMSNorm>(D, 1e-6, DType::BF16));
      layers->push_back(layer);
    }
    inner->register_module("norm", std::make_shared<nn::RMSNorm>(D, 1e-6, DType::BF16));
    root->register_module("lm_head", std::make_shared<nn::Linear>(D, V, false, DType::BF16));
    return std::shared_ptr<nn::Module>(root);
  }();
  return *model;
}

PlanOptions budget(std::vector<std::string> no_split) {
  PlanOptions o;
  o.max_memory = MaxMemory{{Device::cuda(0), 40 * kGiB}, {Device::cuda(1), 40 * kGiB}, {Device::cpu(), 64 * kGiB}};
  o.no_split_module_classes = std::move(no_split);
  return o;
}

void report(benchmark::State& state, const nn::Module& model, const DeviceMap& map) {
  state.counters["params_B"] = static_cast<double>(compute_module_sizes(model).total()) / 4e9;
  state.counters["map_keys"] = static_cast<double>(map.size());
}

void BM_ComputeModuleSizes_Linear1000(benchmark::State& state) {
  const nn::Module& model = linear1000();
  for (auto _ : state) benchmark::DoNotOptimize(compute_module_sizes(model).total());
}
BENCHMARK(BM_ComputeModuleSizes_Linear1000)->Unit(benchmark::kMillisecond);

void BM_InferAutoDeviceMap_Linear1000(benchmark::State& state) {
  const nn::Module& model = linear1000();
  PlanOptions o = budget({});
  DeviceMap map;
  for (auto _ : state) map = infer_auto_device_map(model, o);
  report(state, model, map);
}
BENCHMARK(BM_InferAutoDeviceMap_Linear1000)->Unit(benchmark::kMillisecond);

void BM_PlanAuto_Linear1000_F16(benchmark::State& state) {
  const nn::Module& model = linear1000();
  PlanOptions o = budget({});
  o.dtype = DType::F16;
  DeviceMap map;
  for (auto _ : state) map = plan_device_map(model, DeviceMapMode::Auto, o);
  report(state, model, map);
}
BENCHMARK(BM_PlanAuto_Linear1000_F16)->Unit(benchmark::kMillisecond);

void BM_InferAutoDeviceMap_Llama1000(benchmark::State& state) {
  const nn::Module& model = llama1000();
  PlanOptions o = budget({"LlamaDecoderLayer"});
  DeviceMap map;
  for (auto _ : state) map = infer_auto_device_map(model, o);
  state.counters["params_B"] = static_cast<double>(compute_module_sizes(model).total()) / 2e9;
  state.counters["map_keys"] = static_cast<double>(map.size());
}
BENCHMARK(BM_InferAutoDeviceMap_Llama1000)->Unit(benchmark::kMillisecond);

void BM_PlanBalancedLow0_Llama1000(benchmark::State& state) {
  const nn::Module& model = llama1000();
  PlanOptions o = budget({"LlamaDecoderLayer"});
  DeviceMap map;
  for (auto _ : state) map = plan_device_map(model, DeviceMapMode::BalancedLow0, o);
  state.counters["map_keys"] = static_cast<double>(map.size());
}
BENCHMARK(BM_PlanBalancedLow0_Llama1000)->Unit(benchmark::kMillisecond);

void BM_CheckDeviceMap_Llama1000(benchmark::State& state) {
  const nn::Module& model = llama1000();
  PlanOptions o = budget({"LlamaDecoderLayer"});
  o.clean_result = false;
  DeviceMap map = infer_auto_device_map(model, o);
  for (auto _ : state) check_device_map(model, map);
  state.counters["map_keys"] = static_cast<double>(map.size());
}
BENCHMARK(BM_CheckDeviceMap_Llama1000)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  // The budgets name cuda:0 and cuda:1 whether or not this machine has them: planning needs no GPU, and the
  // "not available" warning would repeat on every iteration.
  ferry::set_log_level(ferry::LogLevel::Error);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
