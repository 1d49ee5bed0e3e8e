// Models executing on an accelerator: device maps {gpu}, {gpu, cpu}, {gpu, cpu, disk}, and cpu_offload /
// disk_offload with the accelerator as execution device, with prefetch 0 (Accelerate's synchronous loading) and 2
// (weights read and copied ahead, big_modeling/device_staging.h). Greedy ids must equal the cpu resident run's,
// logits within a tolerance, and prefetch 0 and 2 must give identical logits.
//
// The same cases run twice: on a virtual accelerator (host memory, so everywhere, bit-exact to cpu: it exercises
// the dispatch, staging and accounting without a GPU), and on cuda:0 (CudaExecution*, skipped without a GPU) where
// the kernels differ from the cpu's in summation order (stated tolerance below).
#include <gtest/gtest.h>

#include <algorithm>

#include "ferry/big_modeling/cpu_offload.h"
#include "ferry/core/backend.h"
#include "ferry/core/cpu_features.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/kv_cache.h"
#include "ferry/ops/gather.h"
#include "support/cuda_device.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

Tensor prompt() { return Tensor::from_vector(std::vector<int64_t>{3, 14, 15, 92, 65, 35, 89, 7}, {8}); }

struct Run {
  std::vector<int64_t> ids;     // greedy continuation
  std::vector<Tensor> logits;   // every step's last row, on cpu
};

Run greedy(CausalLM& model, int steps = 6) {
  Run r;
  auto cache = model.make_cache();
  Tensor logits = model.logits(prompt(), cache, 1).to(Device::cpu());
  for (int i = 0; i <= steps; ++i) {
    r.logits.push_back(logits);
    std::vector<float> last = logits.to_vector<float>();
    const int64_t next = std::max_element(last.begin(), last.end()) - last.begin();
    r.ids.push_back(next);
    if (i < steps) logits = model.logits(Tensor::from_vector(std::vector<int64_t>{next}, {1}), cache, 1).to(Device::cpu());
  }
  return r;
}

// rel_tol: max |a - b| relative to max |a| per step (0: bit-exact).
void expect_same(const Run& want, const Run& got, double rel_tol, const std::string& what) {
  EXPECT_EQ(want.ids, got.ids) << what;
  for (std::size_t i = 0; i < want.logits.size() && i < got.logits.size(); ++i) {
    const double diff = test::max_abs_diff(want.logits[i], got.logits[i]);
    EXPECT_LE(diff, rel_tol * test::max_abs(want.logits[i])) << what << ", step " << i;
  }
}

struct Arch {
  std::string name;
  nlohmann::json config;
  std::string layers;  // prefix of the blocks
  std::vector<std::string> first, rest;  // device-map entries: on the device / offloaded
};

std::vector<Arch> archs() {
  return {
      {"llama", test::tiny_llama_config(), "model.layers",
       {"model.embed_tokens", "model.layers.0", "model.rotary_emb"}, {"model.layers.1", "model.norm", "lm_head"}},
      // GPT-2's head is tied to wte: both stay on the device.
      {"gpt2", test::tiny_gpt2_config(), "transformer.h",
       {"transformer.wte", "transformer.wpe", "transformer.h.0", "lm_head"}, {"transformer.h.1", "transformer.ln_f"}},
      {"gptj", test::tiny_gptj_config(), "transformer.h",
       {"transformer.wte", "transformer.h.0"}, {"transformer.h.1", "transformer.ln_f", "lm_head"}},
  };
}

// Every case on `gpu` against the cpu resident run.
void run_cases(Device gpu, double rel_tol) {
  for (const Arch& arch : archs()) {
    SCOPED_TRACE(arch.name + " on " + gpu.str());
    test::TempDir dir;
    nn::manual_seed(5);
    test::write_random_hf_folder(dir.path(), arch.config);
    auto resident = AutoModelForCausalLM::from_pretrained(dir.path());
    const Run want = greedy(*resident);

    {  // the whole model on the device
      auto m = AutoModelForCausalLM::from_pretrained(dir.path(), {.device_map = DeviceMap{{"", gpu}}});
      expect_same(want, greedy(*m), rel_tol, "{\"\": device}");
    }
    for (bool with_disk : {false, true}) {
      std::vector<Tensor> by_prefetch[2];
      for (int prefetch : {0, 2}) {
        test::TempDir offload("ferry-offload");
        DeviceMap map;
        for (const auto& e : arch.first) map.set(e, gpu);
        for (const auto& e : arch.rest) map.set(e, with_disk && e != arch.rest.front() ? Device::disk() : Device::cpu());
        auto m = AutoModelForCausalLM::from_pretrained(
            dir.path(), {.device_map = map, .offload_folder = offload.path(), .prefetch = prefetch});
        const auto before = transfer_stats().host_to_device;
        const Run got = greedy(*m);
        EXPECT_GT(transfer_stats().host_to_device, before);  // offloaded weights crossed to the device
        expect_same(want, got, rel_tol, std::string(with_disk ? "{device, cpu, disk}" : "{device, cpu}") +
                                            " prefetch " + std::to_string(prefetch));
        by_prefetch[prefetch / 2] = got.logits;
      }
      for (std::size_t i = 0; i < by_prefetch[0].size(); ++i)
        EXPECT_EQ(test::max_abs_diff(by_prefetch[0][i], by_prefetch[1][i]), 0.0) << "prefetch 0 vs 2, step " << i;
    }
    {  // cpu_offload and disk_offload with the device as execution device
      auto m = AutoModelForCausalLM::from_pretrained(dir.path());
      cpu_offload(*m, gpu);
      expect_same(want, greedy(*m), rel_tol, "cpu_offload");
      test::TempDir offload("ferry-offload");
      for (int prefetch : {0, 2}) {
        auto d = AutoModelForCausalLM::from_pretrained(dir.path());
        disk_offload(*d, offload.path(), gpu, false, {}, prefetch);
        expect_same(want, greedy(*d), rel_tol, "disk_offload prefetch " + std::to_string(prefetch));
      }
    }
  }
}

// Three sequences of 8, 3 and 1 prompt tokens in one KvCacheBatch per step, decoding greedily: each step's last
// rows [3, V] on cpu.
std::vector<Tensor> batched_greedy(CausalLM& model, int steps = 4) {
  const std::vector<std::vector<int64_t>> prompts = {{3, 14, 15, 92, 65, 35, 89, 7}, {2, 71, 82}, {8}};
  std::vector<std::shared_ptr<KvCache>> caches;
  std::vector<int64_t> ids;
  std::vector<KvCacheBatch::Sequence> seqs;
  for (const auto& p : prompts) {
    caches.push_back(model.make_cache());
    ids.insert(ids.end(), p.begin(), p.end());
    seqs.push_back({caches.back(), static_cast<int64_t>(p.size())});
  }
  std::vector<Tensor> out;
  for (int step = 0; step < steps; ++step) {
    Tensor logits = model.logits(Tensor::from_vector(ids, {static_cast<int64_t>(ids.size())}), KvCacheBatch(seqs), 1)
                        .to(Device::cpu());
    out.push_back(logits);
    ids = ops::argmax(logits).to_vector<int64_t>();
    for (auto& s : seqs) s.tokens = 1;
  }
  return out;
}

// A batch on `gpu`, resident and with {device, cpu, disk}, against the batch on the cpu.
void run_batch_cases(Device gpu, double rel_tol) {
  for (const Arch& arch : archs()) {
    SCOPED_TRACE(arch.name + " batched on " + gpu.str());
    test::TempDir dir, offload("ferry-offload");
    nn::manual_seed(9);
    test::write_random_hf_folder(dir.path(), arch.config);
    const std::vector<Tensor> want = batched_greedy(*AutoModelForCausalLM::from_pretrained(dir.path()));
    DeviceMap map;
    for (const auto& e : arch.first) map.set(e, gpu);
    for (const auto& e : arch.rest) map.set(e, e != arch.rest.front() ? Device::disk() : Device::cpu());
    for (const DeviceMap& m : {DeviceMap{{"", gpu}}, map}) {
      const auto got = batched_greedy(*AutoModelForCausalLM::from_pretrained(
          dir.path(), {.device_map = m, .offload_folder = offload.path(), .prefetch = 2}));
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(ops::argmax(got[i]).to_vector<int64_t>(), ops::argmax(want[i]).to_vector<int64_t>()) << i;
        EXPECT_LE(test::max_abs_diff(got[i], want[i]), rel_tol * test::max_abs(want[i])) << "step " << i;
      }
    }
  }
}

TEST(DeviceExecution, VirtualAcceleratorRunsBatchesAsTheCpu) {
  enable_virtual_devices(VirtualDeviceOptions{});
  run_batch_cases(Device::virt(0), 0.0);
  disable_virtual_devices();
}

TEST(DeviceExecution, VirtualAcceleratorMatchesCpuBitForBit) {
  enable_virtual_devices(VirtualDeviceOptions{});
  run_cases(Device::virt(0), 0.0);
  disable_virtual_devices();
}

TEST(DeviceExecution, PrefetchedWeightsAreCopiedAheadOfTheirModule) {
  enable_virtual_devices(VirtualDeviceOptions{});
  test::TempDir dir, offload("ferry-offload");
  nn::manual_seed(6);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  DeviceMap map{{"model.embed_tokens", Device::virt(0)}, {"model.rotary_emb", Device::virt(0)},
                {"model.layers", Device::cpu()},        {"model.norm", Device::cpu()},
                {"lm_head", Device::cpu()}};
  auto m = AutoModelForCausalLM::from_pretrained(dir.path(), {.device_map = map, .prefetch = 2});
  greedy(*m, 2);
  const auto sd = m->state_dict();
  uint64_t offloaded = 0;
  for (const auto& [name, t] : sd)
    if (name.rfind("model.layers", 0) == 0 || name.rfind("model.norm", 0) == 0 || name.rfind("lm_head", 0) == 0)
      offloaded += t.nbytes();
  // Copies made ahead for the next forward are counted when made, so count over several forwards: each offloaded
  // byte crosses once per forward, never twice. Besides weights, each forward sends its token ids and positions to
  // the device (a few bytes; an ASan run counted 192 over the ~6 forwards): 4 KiB of slack for those.
  reset_transfer_stats();
  greedy(*m, 4);  // 5 forwards
  EXPECT_GE(transfer_stats().host_to_device, 4 * offloaded);
  EXPECT_LE(transfer_stats().host_to_device, 6 * offloaded + 4096);
  disable_virtual_devices();
}

TEST(CudaExecution, DeviceMapsAndOffloadMatchTheCpu) {
  FERRY_REQUIRE_CUDA();
  // f32 weights (the tiny folders): GEMV/attention/norm sums in another order than the cpu: ~1e-6 relative.
  run_cases(Device::cuda(0), 1e-4);
}

TEST(CudaExecution, BatchesMatchTheCpu) {
  FERRY_REQUIRE_CUDA();
  run_batch_cases(Device::cuda(0), 1e-4);
}

TEST(CudaExecution, Bf16WeightsMatchTheCpu) {
  FERRY_REQUIRE_CUDA();
  test::TempDir dir;
  nn::manual_seed(8);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config(), DType::BF16);
  auto resident = AutoModelForCausalLM::from_pretrained(dir.path());
  auto gpu = AutoModelForCausalLM::from_pretrained(dir.path(), {.device_map = DeviceMap{{"", Device::cuda(0)}}});
  models::Run want;
  {  // the cpu with f32 activations, as the GPU computes: AVX-512 BF16 CPUs would round x to bf16 (vdpbf16ps)
    ScopedIsa f32_activations(std::min(cpu_isa(), Isa::AVX2));
    want = greedy(*resident);
  }
  expect_same(want, greedy(*gpu), 1e-3, "bf16 on cuda:0");
}

}  // namespace
}  // namespace ferry::models
