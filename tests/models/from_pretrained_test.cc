// AutoModelForCausalLM::from_pretrained on folders written by ferry (no Python needed): round trips for every
// architecture, ties, zero-copy loading, dtype choice, shards, missing / mismatched / unexpected tensors, base-model
// checkpoints, device_map values, and errors raised before any weight is read.
#include "ferry/models/auto_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/core/storage.h"
#include "ferry/big_modeling/resident_weights.h"
#include "ferry/io/safetensors.h"
#include "ferry/nn/init.h"
#include "ferry/nn/module_tensors.h"
#include "support/error_of.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

Tensor prompt() { return Tensor::from_vector(std::vector<int64_t>{3, 14, 15, 92, 65, 35, 89, 7}, {8}); }

using test::error_of;

// Rewrites folder/model.safetensors through `edit`.
void edit_checkpoint(const fs::path& folder, const std::function<void(io::StateDict&)>& edit) {
  io::StateDict tensors;
  for (const auto& [name, t] : io::load_safetensors(folder / "model.safetensors")) tensors.insert(name, t.clone());
  edit(tensors);
  io::save_safetensors(tensors, folder / "model.safetensors");
}

class RoundTrip : public ::testing::TestWithParam<std::pair<std::string, nlohmann::json>> {};

TEST_P(RoundTrip, LoadedModelComputesWhatTheSavedOneDid) {
  test::TempDir dir;
  nn::manual_seed(7);
  auto written = test::write_random_hf_folder(dir.path(), GetParam().second);
  auto loaded = AutoModelForCausalLM::from_pretrained(dir.path());
  EXPECT_EQ(loaded->type_name(), written->type_name());
  EXPECT_EQ(test::max_abs_diff(loaded->logits(prompt()), written->logits(prompt())), 0.0);
  for (const auto& [name, t] : loaded->state_dict()) EXPECT_FALSE(t.is_meta()) << name;
}

INSTANTIATE_TEST_SUITE_P(Architectures, RoundTrip,
                         ::testing::Values(std::pair{std::string("llama"), test::tiny_llama_config()},
                                           std::pair{std::string("mistral"), test::tiny_mistral_config()},
                                           std::pair{std::string("qwen2"), test::tiny_qwen2_config()},
                                           std::pair{std::string("gpt2"), test::tiny_gpt2_config()},
                                           std::pair{std::string("gptj"), test::tiny_gptj_config()}),
                         [](const auto& info) { return info.param.first; });

TEST(FromPretrained, TiedHeadComesFromTheEmbedding) {
  test::TempDir dir;
  test::write_random_hf_folder(dir.path(), test::tiny_qwen2_config());
  EXPECT_FALSE(io::SafetensorsFile::open(dir.path() / "model.safetensors").contains("lm_head.weight"));
  auto model = AutoModelForCausalLM::from_pretrained(dir.path());
  EXPECT_TRUE(nn::get_module_tensor(*model, "lm_head.weight")
                  .is_same(nn::get_module_tensor(*model, "model.embed_tokens.weight")));
}

TEST(FromPretrained, WeightsOfTheSavedDtypeAreZeroCopyViews) {
  test::TempDir dir;
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config(), DType::BF16);
  auto model = AutoModelForCausalLM::from_pretrained(dir.path());  // dtype: config's torch_dtype (bfloat16)
  for (const auto& [name, t] : model->named_parameters()) {
    EXPECT_EQ(t.dtype(), DType::BF16) << name;
    EXPECT_TRUE(t.read_only()) << name << " was copied instead of viewing the mapped file";
  }
}

TEST(FromPretrained, RequestedDtypeConvertsAtLoad) {
  test::TempDir dir;
  nn::manual_seed(3);
  auto written = test::write_random_hf_folder(dir.path(), test::tiny_llama_config(), DType::F32);
  auto model = AutoModelForCausalLM::from_pretrained(dir.path(), {.dtype = DType::F16});
  for (const auto& [name, t] : model->named_parameters()) EXPECT_EQ(t.dtype(), DType::F16) << name;
  const Tensor a = written->logits(prompt()), b = model->logits(prompt());
  EXPECT_GT(test::max_abs_diff(a, b), 0.0);
  EXPECT_LE(test::max_abs_diff(a, b) / test::max_abs(a), 2e-2);
}

TEST(FromPretrained, ShardedCheckpoint) {
  test::TempDir dir;
  nn::manual_seed(5);
  auto written = test::write_random_hf_folder(dir.path(), test::tiny_gptj_config(), DType::F32, 20000);
  ASSERT_TRUE(fs::exists(dir.path() / "model.safetensors.index.json"));
  auto model = AutoModelForCausalLM::from_pretrained(dir.path());
  EXPECT_EQ(test::max_abs_diff(model->logits(prompt()), written->logits(prompt())), 0.0);
  // A shard the index names but the folder lacks (an incomplete download) is NotFound.
  std::vector<fs::path> shards;
  for (const auto& e : fs::directory_iterator(dir.path()))
    if (e.path().extension() == ".safetensors") shards.push_back(e.path());
  ASSERT_GE(shards.size(), 2u);
  fs::remove(shards.back());
  EXPECT_THAT(error_of([&] { AutoModelForCausalLM::from_pretrained(dir.path()); }), HasSubstr("do not exist"));
  EXPECT_EQ(test::error_kind_of([&] { AutoModelForCausalLM::from_pretrained(dir.path()); }), ErrorKind::NotFound);
}

TEST(FromPretrained, MissingTensorsAreListed) {
  test::TempDir dir;
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  edit_checkpoint(dir.path(), [](io::StateDict& t) {
    t.erase("model.layers.1.mlp.up_proj.weight");
    t.erase("model.norm.weight");
  });
  const std::string e = error_of([&] { AutoModelForCausalLM::from_pretrained(dir.path()); });
  EXPECT_THAT(e, AllOf(HasSubstr("lacks 2 tensor(s)"), HasSubstr("model.layers.1.mlp.up_proj.weight"),
                       HasSubstr("model.norm.weight"), HasSubstr("same model")));
  // The files are there; their contents do not match the model.
  EXPECT_EQ(test::error_kind_of([&] { AutoModelForCausalLM::from_pretrained(dir.path()); }), ErrorKind::InvalidValue);
}

TEST(FromPretrained, ShapeMismatchNamesTensorAndFile) {
  test::TempDir dir;
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  nlohmann::json c = test::tiny_llama_config();
  c["intermediate_size"] = 40;
  std::ofstream(dir.path() / "config.json") << c.dump();
  const std::string e = error_of([&] { AutoModelForCausalLM::from_pretrained(dir.path()); });
  EXPECT_THAT(e, AllOf(HasSubstr("model.safetensors"), HasSubstr("model.layers.0.mlp.gate_proj.weight"),
                       HasSubstr("[48, 32]"), HasSubstr("[40, 32]")));
}

TEST(FromPretrained, UnexpectedTensorsWarnButStaleBuffersAreSkipped) {
  test::TempDir dir;
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  edit_checkpoint(dir.path(), [](io::StateDict& t) {
    t.insert("model.layers.0.self_attn.rotary_emb.inv_freq", Tensor::zeros({4}, DType::F32));  // old checkpoints
    t.insert("model.extra.weight", Tensor::zeros({2}, DType::F32));
  });
  ScopedLogCapture log(LogLevel::Warning);
  AutoModelForCausalLM::from_pretrained(dir.path());
  EXPECT_TRUE(log.contains("model.extra.weight"));
  EXPECT_FALSE(log.contains("inv_freq"));
}

TEST(FromPretrained, BaseModelCheckpointGetsThePrefix) {
  // The original "gpt2" upload was saved from GPT2Model: keys "h.0.attn.c_attn.weight", plus attn.bias buffers.
  test::TempDir dir;
  nn::manual_seed(11);
  auto written = test::write_random_hf_folder(dir.path(), test::tiny_gpt2_config());
  edit_checkpoint(dir.path(), [](io::StateDict& t) {
    io::StateDict renamed;
    for (const auto& [name, tensor] : t) renamed.insert(name.substr(std::string("transformer.").size()), tensor);
    renamed.insert("h.0.attn.bias", Tensor::zeros({1, 1, 4, 4}, DType::F32));
    t = renamed;
  });
  ScopedLogCapture log(LogLevel::Warning);
  auto model = AutoModelForCausalLM::from_pretrained(dir.path());
  EXPECT_TRUE(log.messages().empty());
  EXPECT_EQ(test::max_abs_diff(model->logits(prompt()), written->logits(prompt())), 0.0);
}

TEST(FromPretrained, CpuDeviceMapsLoadResident) {
  test::TempDir dir;
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  EXPECT_NO_THROW(AutoModelForCausalLM::from_pretrained(dir.path(), {.device_map = std::string("cpu")}));
  EXPECT_NO_THROW(AutoModelForCausalLM::from_pretrained(dir.path(), {.device_map = DeviceMap{{"", Device::cpu()}}}));
  EXPECT_TRUE(is_resident_cpu_map(std::monostate{}));
  EXPECT_FALSE(is_resident_cpu_map(std::string("auto")));
  EXPECT_FALSE(is_resident_cpu_map(DeviceMap{{"model", Device::cpu()}, {"lm_head", Device::disk()}}));
}

struct VirtualDevices {
  VirtualDevices() { enable_virtual_devices(VirtualDeviceOptions{}); }
  ~VirtualDevices() { disable_virtual_devices(); }
};

// Greedy decode of 6 tokens after the prompt; returns every logits row.
std::vector<Tensor> generate(CausalLM& model, std::shared_ptr<KvCache> cache) {
  std::vector<Tensor> rows{model.logits(prompt(), cache, 1)};
  for (int i = 0; i < 6; ++i) {
    std::vector<float> last = rows.back().to_vector<float>();
    const int64_t next = std::max_element(last.begin(), last.end()) - last.begin();
    rows.push_back(model.logits(Tensor::from_vector(std::vector<int64_t>{next}, {1}), cache, 1));
  }
  return rows;
}

TEST(FromPretrained, ExplicitDeviceMapOverDevicesCpuAndDiskMatchesResident) {
  VirtualDevices devices;
  test::TempDir dir, offload("ferry-offload");
  nn::manual_seed(21);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  auto resident = AutoModelForCausalLM::from_pretrained(dir.path());
  DeviceMap map{{"model.embed_tokens", Device::virt(0)}, {"model.layers.0", Device::virt(0)},
                {"model.layers.1", Device::virt(1)},     {"model.norm", Device::cpu()},
                {"model.rotary_emb", Device::virt(0)},   {"lm_head", Device::disk()}};
  auto dispatched = AutoModelForCausalLM::from_pretrained(dir.path(), {.device_map = map, .offload_folder = offload.path()});
  EXPECT_EQ(nn::get_module_tensor(*dispatched, "model.layers.1.mlp.up_proj.weight").device(), Device::virt(1));
  EXPECT_TRUE(nn::get_module_tensor(*dispatched, "lm_head.weight").is_meta());  // on disk between forwards
  auto cache = dispatched->make_cache();
  const std::vector<Tensor> a = generate(*resident, resident->make_cache()), b = generate(*dispatched, cache);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(test::max_abs_diff(a[i], b[i]), 0.0) << "step " << i;
  // The cache of each layer lives on that layer's execution device.
  EXPECT_EQ(cache->device(0), Device::virt(0));
  EXPECT_EQ(cache->device(1), Device::virt(1));
  EXPECT_EQ(b.back().device(), Device::cpu());  // outputs come back to the input's device
}

TEST(FromPretrained, AutoModeSplitsOverABudgetAndMatchesResident) {
  VirtualDevices devices;
  test::TempDir dir;
  nn::manual_seed(22);
  test::write_random_hf_folder(dir.path(), test::tiny_gpt2_config());  // tied head
  auto resident = AutoModelForCausalLM::from_pretrained(dir.path());
  // ~40 KiB per block in f32: two blocks cannot share one 64 KiB device.
  auto dispatched = AutoModelForCausalLM::from_pretrained(
      dir.path(), {.device_map = std::string("sequential"),
                   .max_memory = MaxMemory{{Device::virt(0), 64 << 10}, {Device::virt(1), 64 << 10},
                                           {Device::cpu(), 64 << 20}}});
  std::set<Device> used;
  for (const auto& [name, t] : dispatched->named_parameters()) used.insert(t.device());
  EXPECT_GE(used.size(), 2u) << "the budget should force more than one device";
  const std::vector<Tensor> a = generate(*resident, resident->make_cache());
  const std::vector<Tensor> b = generate(*dispatched, dispatched->make_cache());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(test::max_abs_diff(a[i], b[i]), 0.0) << "step " << i;
}

// Issue 14: a tied head whose embedding is offloaded. The checkpoint stores the tied weight once, as
// model.embed_tokens.weight; lm_head's hook asks for lm_head.weight. Every layout that offloads the pair must give
// the resident logits, bit for bit, for Llama-family (tied llama, qwen2) and GPT-2 (wte/lm_head) folders.
struct TiedCase {
  std::string name;
  nlohmann::json config;
  std::string embedding;  // the embedding module
  std::string norm;       // the final norm
};

std::vector<TiedCase> tied_cases() {
  nlohmann::json llama = test::tiny_llama_config();
  llama["tie_word_embeddings"] = true;
  return {{"llama", llama, "model.embed_tokens", "model.norm"},
          {"qwen2", test::tiny_qwen2_config(), "model.embed_tokens", "model.norm"},
          {"gpt2", test::tiny_gpt2_config(), "transformer.wte", "transformer.ln_f"}};
}

void expect_same_generation(CausalLM& resident, CausalLM& dispatched, const std::string& what) {
  const std::vector<Tensor> a = generate(resident, resident.make_cache());
  const std::vector<Tensor> b = generate(dispatched, dispatched.make_cache());
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(test::max_abs_diff(a[i], b[i]), 0.0) << what << ", step " << i;
}

TEST(FromPretrained, TiedHeadWithItsEmbeddingOnDiskMatchesResident) {
  for (const TiedCase& c : tied_cases()) {
    SCOPED_TRACE(c.name);
    test::TempDir dir;
    nn::manual_seed(31);
    test::write_random_hf_folder(dir.path(), c.config);
    ASSERT_FALSE(io::SafetensorsFile::open(dir.path() / "model.safetensors").contains("lm_head.weight"));
    auto resident = AutoModelForCausalLM::from_pretrained(dir.path());
    const std::string base = c.embedding.substr(0, c.embedding.find('.'));

    // Everything on disk (what --max-memory cpu=20MiB plans for a real model).
    {
      test::TempDir offload("ferry-offload");
      auto m = AutoModelForCausalLM::from_pretrained(
          dir.path(), {.device_map = DeviceMap{{"", Device::disk()}}, .offload_folder = offload.path()});
      expect_same_generation(*resident, *m, "all on disk");
    }
    // Only the embedding and the head on disk, the rest resident.
    {
      test::TempDir offload("ferry-offload");
      DeviceMap map{{c.embedding, Device::disk()}, {"lm_head", Device::disk()}};
      for (const auto& [name, child] : resident->get_submodule(base).named_children())
        if (base + "." + name != c.embedding) map.set(base + "." + name, Device::cpu());
      auto m = AutoModelForCausalLM::from_pretrained(dir.path(), {.device_map = map, .offload_folder = offload.path()});
      EXPECT_TRUE(nn::get_module_tensor(*m, "lm_head.weight").is_meta());
      expect_same_generation(*resident, *m, "embedding and head on disk");
    }
    // The planner under a budget of 40 % of the weights: the pair lands on disk together.
    {
      test::TempDir offload("ferry-offload");
      int64_t bytes = 0;
      for (const auto& [name, t] : resident->state_dict()) bytes += static_cast<int64_t>(t.nbytes());
      auto m = AutoModelForCausalLM::from_pretrained(
          dir.path(), {.device_map = std::string("auto"), .max_memory = MaxMemory{{Device::cpu(), bytes * 2 / 5}},
                       .offload_folder = offload.path()});
      expect_same_generation(*resident, *m, "auto at 40 %");
    }
  }
}

TEST(FromPretrained, TiedHeadWithItsEmbeddingOffloadedToCpuMatchesResident) {
  VirtualDevices devices;
  for (const TiedCase& c : tied_cases()) {
    SCOPED_TRACE(c.name);
    test::TempDir dir;
    nn::manual_seed(32);
    test::write_random_hf_folder(dir.path(), c.config);
    auto resident = AutoModelForCausalLM::from_pretrained(dir.path());
    // The execution device is virt(0): cpu-placed modules are offloaded (read from a RAM weights map per forward).
    const std::string base = c.embedding.substr(0, c.embedding.find('.'));
    DeviceMap map{{c.embedding, Device::cpu()}, {"lm_head", Device::cpu()}};
    for (const auto& [name, child] : resident->get_submodule(base).named_children())
      if (base + "." + name != c.embedding) map.set(base + "." + name, Device::virt(0));
    auto m = AutoModelForCausalLM::from_pretrained(dir.path(), {.device_map = map});
    EXPECT_TRUE(nn::get_module_tensor(*m, "lm_head.weight").is_meta());
    expect_same_generation(*resident, *m, "cpu-offloaded pair");
  }
}

// Issue 21: disk weights read with O_DIRECT into a staging pool give the same logits, bit for bit, as page-cache
// views, for every family, from the checkpoint itself (bf16 shards read in place) and from an offload folder (a dtype
// change writes .dat files), with the prefetcher on and off, and with the tied embedding on disk.
TEST(FromPretrained, DirectAndMmapDiskReadsAreBitIdenticalForEveryFamily) {
  const std::vector<std::pair<std::string, nlohmann::json>> families = {
      {"llama", test::tiny_llama_config()}, {"mistral", test::tiny_mistral_config()},
      {"qwen2", test::tiny_qwen2_config()}, {"gpt2", test::tiny_gpt2_config()}, {"gptj", test::tiny_gptj_config()}};
  for (const auto& [family, config] : families) {
    test::TempDir dir;
    nn::manual_seed(41);
    test::write_random_hf_folder(dir.path(), config, DType::BF16, /*max_shard_bytes=*/20000);
    auto resident = AutoModelForCausalLM::from_pretrained(dir.path());
    for (const std::optional<DType> dtype : {std::optional<DType>(), std::optional<DType>(DType::F32)}) {
      for (const int prefetch : {0, 2}) {
        SCOPED_TRACE(family + (dtype ? " as f32 (offload folder)" : " bf16 (checkpoint)") + ", prefetch " +
                     std::to_string(prefetch));
        std::vector<std::vector<Tensor>> runs;
        for (const OffloadIo mode : {OffloadIo::Mmap, OffloadIo::Direct}) {
          test::TempDir offload("ferry-offload");
          auto reader = std::make_shared<io::StagedReader>(io::StagedReaderOptions{.pool_bytes = 1u << 20});
          FromPretrainedOptions o{.device_map = DeviceMap{{"", Device::disk()}}, .dtype = dtype,
                                  .offload_folder = offload.path(), .prefetch = prefetch, .offload_io = mode};
          if (mode == OffloadIo::Direct) o.staged_reader = reader;
          auto m = AutoModelForCausalLM::from_pretrained(dir.path(), o);
          runs.push_back(generate(*m, m->make_cache()));
          if (mode == OffloadIo::Direct) {
            const auto s = reader->stats();
            EXPECT_GT(s.tensors, 0u);
            EXPECT_EQ(s.overflow_peak, 0u) << "every read fit the pool: staged tensors were released after use";
            if (prefetch > 0) {
              EXPECT_GT(s.prefetched, 0u);
            }
          } else {
            EXPECT_EQ(reader->stats().tensors, 0u);
          }
        }
        ASSERT_EQ(runs[0].size(), runs[1].size());
        for (std::size_t i = 0; i < runs[0].size(); ++i) EXPECT_EQ(test::max_abs_diff(runs[0][i], runs[1][i]), 0.0) << i;
        if (!dtype) {  // bf16 as stored: also the resident model's logits
          const std::vector<Tensor> want = generate(*resident, resident->make_cache());
          for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(test::max_abs_diff(want[i], runs[1][i]), 0.0) << i;
        }
      }
    }
  }
}

bool any_cpu_view(const nn::Module& m) {
  for (const auto& [name, t] : m.state_dict())
    if (t.device().is_cpu() && t.storage() && t.storage()->kind() == Storage::Kind::MappedView) return true;
  return false;
}

std::size_t locked_kib() {  // VmLck of this process
  std::ifstream in("/proc/self/status");
  std::string key;
  std::size_t kb = 0;
  while (in >> key)
    if (key == "VmLck:" && in >> kb) return kb;
  return 0;
}

// Issue 21: --no-mmap / --mlock. cpu-placed weights are zero-copy views of the checkpoint by default, copies of their
// own with use_mmap = false or when the disk part is read direct (RAM is short); ties stay tied; logits unchanged.
TEST(FromPretrained, CpuWeightsAreViewsOrCopiesAndCanBeLocked) {
  test::TempDir dir;
  nn::manual_seed(51);
  test::write_random_hf_folder(dir.path(), test::tiny_qwen2_config(), DType::BF16);  // tied head
  auto views = AutoModelForCausalLM::from_pretrained(dir.path());
  EXPECT_TRUE(any_cpu_view(*views));
  auto copies = AutoModelForCausalLM::from_pretrained(dir.path(), {.use_mmap = false});
  EXPECT_FALSE(any_cpu_view(*copies));
  EXPECT_TRUE(nn::get_module_tensor(*copies, "lm_head.weight").is_same(nn::get_module_tensor(*copies, "model.embed_tokens.weight")));
  expect_same_generation(*views, *copies, "copied");

  // Direct disk reads (RAM short): cpu weights are copied by default, kept as views with use_mmap = true.
  test::TempDir offload("ferry-offload");
  DeviceMap map{{"model.embed_tokens", Device::cpu()}, {"lm_head", Device::cpu()}, {"model.layers", Device::disk()},
                {"model.norm", Device::cpu()}, {"model.rotary_emb", Device::cpu()}};
  auto direct = AutoModelForCausalLM::from_pretrained(
      dir.path(), {.device_map = map, .offload_folder = offload.path(), .offload_io = OffloadIo::Direct});
  EXPECT_FALSE(any_cpu_view(*direct));
  expect_same_generation(*views, *direct, "direct, copied");
  auto direct_views = AutoModelForCausalLM::from_pretrained(
      dir.path(), {.device_map = map, .offload_folder = offload.path(), .offload_io = OffloadIo::Direct,
                   .use_mmap = true});
  EXPECT_TRUE(any_cpu_view(*direct_views));

  const std::size_t before = locked_kib();
  const LockReport r = lock_weights_in_ram(*copies);
  if (!r.error.empty()) GTEST_SKIP() << r.error;  // an unprivileged run with a small RLIMIT_MEMLOCK
  std::size_t bytes = 0;
  for (const auto& [name, t] : copies->named_parameters()) bytes += t.nbytes();
  EXPECT_GE(r.locked_bytes, bytes);
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer's mlock interceptor succeeds without locking anything
  EXPECT_GT(locked_kib(), before);
#else
  (void)before;
#endif
  auto locked = AutoModelForCausalLM::from_pretrained(dir.path(), {.mlock = true});
  expect_same_generation(*views, *locked, "locked");
}

TEST(FromPretrained, DispatchReportsMissingTensorsButNotTiedOnes) {
  test::TempDir dir, offload("ferry-offload");
  test::write_random_hf_folder(dir.path(), test::tiny_qwen2_config());  // tied: no lm_head.weight in the file
  DeviceMap map{{"model.embed_tokens", Device::cpu()}, {"model.layers", Device::disk()},
                {"model.norm", Device::cpu()},         {"model.rotary_emb", Device::cpu()},
                {"lm_head", Device::cpu()}};  // with its tied embedding: dispatch refuses a tie split across tiers
  EXPECT_NO_THROW(AutoModelForCausalLM::from_pretrained(dir.path(), {.device_map = map, .offload_folder = offload.path()}));
  edit_checkpoint(dir.path(), [](io::StateDict& t) { t.erase("model.layers.0.mlp.up_proj.weight"); });
  EXPECT_THAT(error_of([&] {
                AutoModelForCausalLM::from_pretrained(dir.path(), {.device_map = map, .offload_folder = offload.path()});
              }),
              AllOf(HasSubstr("lacks 1 tensor(s)"), HasSubstr("model.layers.0.mlp.up_proj.weight")));
}

TEST(FromPretrained, BadFoldersFailBeforeReadingWeights) {
  test::TempDir dir;
  const auto kind = [&] { return test::error_kind_of([&] { AutoModelForCausalLM::from_pretrained(dir.path()); }); };
  EXPECT_EQ(test::error_kind_of([&] { AutoModelForCausalLM::from_pretrained(dir.path() / "nope"); }),
            ErrorKind::NotFound);
  EXPECT_THAT(error_of([&] { AutoModelForCausalLM::from_pretrained(dir.path()); }), HasSubstr("config.json"));
  EXPECT_EQ(kind(), ErrorKind::NotFound);
  std::ofstream(dir.path() / "config.json") << R"({"architectures": ["T5ForConditionalGeneration"], "model_type": "t5"})";
  EXPECT_THAT(error_of([&] { AutoModelForCausalLM::from_pretrained(dir.path()); }),
              AllOf(HasSubstr("is an encoder-decoder model"), HasSubstr("AutoModelForSeq2SeqLM")));
  EXPECT_EQ(kind(), ErrorKind::InvalidValue);
  std::ofstream(dir.path() / "config.json") << test::tiny_llama_config().dump();
  EXPECT_THAT(error_of([&] { AutoModelForCausalLM::from_pretrained(dir.path()); }), HasSubstr(dir.path().string()));
  EXPECT_EQ(kind(), ErrorKind::NotFound);  // a config but no weights
}

}  // namespace
}  // namespace ferry::models
