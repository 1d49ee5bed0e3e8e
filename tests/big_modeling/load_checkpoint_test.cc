// load_checkpoint_in_model and load_checkpoint_and_dispatch, after Accelerate's test_modeling_utils.py and
// test_big_modeling.py, plus ferry's rules (missing keys reported, disk weights served from the shards).
#include "ferry/big_modeling/load_checkpoint.h"

#include <gtest/gtest.h>

#include "dispatch_support.h"
#include "ferry/big_modeling/module_sizes.h"
#include "ferry/core/logging.h"
#include "ferry/core/memory.h"
#include "ferry/io/safetensors.h"
#include "ferry/nn/empty_weights.h"
#include "ferry/nn/hooks.h"
#include "ferry/nn/init.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/module_tensors.h"
#include "support/model_for_test.h"
#include "support/torch_bin_writer.h"
#include "toy_llama.h"

namespace ferry {
namespace {

using test::ModelForTest;
using test::same_values;
using test::ScratchDir;

std::unique_ptr<ModelForTest> empty_model_for_test() {
  auto guard = nn::init_empty_weights();
  return std::make_unique<ModelForTest>();
}

void expect_weights_equal(const nn::Module& got, const nn::Module& want) {
  auto a = got.state_dict(), b = want.state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_values(a[i].second, b[i].second)) << a[i].first;
}

TEST(LoadCheckpoint, FromAFileAnIndexAFolderAndABin) {
  ScratchDir dir;
  ModelForTest reference;
  io::StateDict sd = test::state_dict_of(reference);
  for (auto sub : {"single", "sharded", "bin"}) std::filesystem::create_directories(dir.path / sub);
  io::save_safetensors(sd, dir.path / "single" / "model.safetensors");
  io::save_sharded_safetensors(sd, dir.path / "sharded", 100);
  testing::save_torch_bin(sd, dir.path / "bin" / "pytorch_model.bin");
  for (auto path : {dir.path / "single" / "model.safetensors", dir.path / "single",
                    dir.path / "sharded" / "model.safetensors.index.json", dir.path / "sharded",
                    dir.path / "bin" / "pytorch_model.bin"}) {
    auto model = empty_model_for_test();
    auto result = load_checkpoint_in_model(*model, path);
    EXPECT_TRUE(result.missing_keys.empty()) << path;
    expect_weights_equal(*model, reference);
  }
}

TEST(LoadCheckpoint, DiskMapPutsWeightsOnMetaServedFromTheShards) {
  ScratchDir dir, offload;
  ModelForTest reference;
  io::save_safetensors(test::state_dict_of(reference), dir.path / "model.safetensors");
  auto model = empty_model_for_test();
  LoadCheckpointOptions o;
  o.device_map = DeviceMap{{"linear1", Device::cpu()}, {"batchnorm", Device::disk()}, {"linear2", Device::disk()}};
  o.offload_folder = offload.path;
  auto result = load_checkpoint_in_model(*model, dir.path, o);
  EXPECT_TRUE(model->batchnorm->parameter("weight").is_meta());
  EXPECT_TRUE(model->linear2->parameter("weight").is_meta());
  // A disk module's buffers are loaded to cpu unless offload_buffers (Accelerate leaves them unloaded).
  EXPECT_EQ(model->batchnorm->buffer("running_mean").device(), Device::cpu());
  EXPECT_TRUE(same_values(model->batchnorm->buffer("running_var"), reference.batchnorm->buffer("running_var")));
  // Same dtype: the index points into the checkpoint; no .dat copy was written.
  ASSERT_TRUE(result.offload_index.count("linear2.weight"));
  EXPECT_TRUE(result.offload_index.at("linear2.weight").in_safetensors());
  EXPECT_FALSE(std::filesystem::exists(offload.path / "linear2.weight.dat"));
  EXPECT_TRUE(std::filesystem::exists(offload.path / "index.json"));

  auto with_buffers = empty_model_for_test();
  o.offload_buffers = true;
  o.dtype = DType::F16;  // a dtype change writes .dat files, once, in the new dtype
  ScratchDir offload2;
  o.offload_folder = offload2.path;
  load_checkpoint_in_model(*with_buffers, dir.path, o);
  EXPECT_TRUE(with_buffers->batchnorm->buffer("running_mean").is_meta());
  EXPECT_EQ(with_buffers->linear2->parameter("weight").dtype(), DType::F16);
  EXPECT_TRUE(std::filesystem::exists(offload2.path / "linear2.weight.dat"));
  EXPECT_EQ(io::load_offload_index(offload2.path).at("linear2.weight").dtype, DType::F16);
}

TEST(LoadCheckpoint, F16WithOffloadStateDictKeepsTheInt64Buffer) {
  ScratchDir dir, offload;
  ModelForTest reference;
  io::save_safetensors(test::state_dict_of(reference), dir.path / "model.safetensors");
  auto model = empty_model_for_test();
  LoadCheckpointOptions o;
  o.device_map = DeviceMap{{"", Device::cpu()}};
  o.dtype = DType::F16;
  o.offload_state_dict = true;
  o.offload_folder = offload.path;
  load_checkpoint_in_model(*model, dir.path, o);
  EXPECT_EQ(model->linear1->parameter("weight").dtype(), DType::F16);
  EXPECT_EQ(model->linear1->parameter("weight").device(), Device::cpu());
  EXPECT_EQ(model->batchnorm->buffer("num_batches_tracked").dtype(), DType::I64);
  EXPECT_TRUE(same_values(model->linear1->parameter("weight"), reference.linear1->parameter("weight").to(DType::F16)));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(offload.path), {}), 0);  // temp folder removed
}

TEST(LoadCheckpoint, KeepInFp32Modules) {
  ScratchDir dir;
  ModelForTest reference;
  io::save_safetensors(test::state_dict_of(reference), dir.path / "model.safetensors");
  auto model = empty_model_for_test();
  LoadCheckpointOptions o;
  o.dtype = DType::BF16;  // Accelerate applies keep_in_fp32_modules to f16 only; ferry to bf16 too
  o.keep_in_fp32_modules = {"batchnorm"};
  load_checkpoint_in_model(*model, dir.path, o);
  EXPECT_EQ(model->linear1->parameter("weight").dtype(), DType::BF16);
  EXPECT_EQ(model->batchnorm->parameter("weight").dtype(), DType::F32);
}

TEST(LoadCheckpoint, MissingAndUnexpectedKeysAreReportedStrictMakesThemErrors) {
  ScratchDir dir;
  ModelForTest reference;
  io::StateDict sd = test::state_dict_of(reference);
  sd.erase("linear2.bias");
  sd.insert("extra.weight", Tensor::zeros({2}, DType::F32));
  io::save_safetensors(sd, dir.path / "model.safetensors");
  {
    ScopedLogCapture logs(LogLevel::Warning);
    auto model = empty_model_for_test();
    auto r = load_checkpoint_in_model(*model, dir.path);
    EXPECT_EQ(r.missing_keys, std::vector<std::string>{"linear2.bias"});
    EXPECT_EQ(r.unexpected_keys, std::vector<std::string>{"extra.weight"});
    EXPECT_TRUE(logs.contains("were not used when initializing ModelForTest: extra.weight"));
    EXPECT_TRUE(logs.contains("linear2.bias"));
  }
  LoadCheckpointOptions strict;
  strict.strict = true;
  auto model = empty_model_for_test();
  try {
    load_checkpoint_in_model(*model, dir.path, strict);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("extra.weight"), std::string::npos);
  }
}

TEST(LoadCheckpoint, ClearErrorsForMapsWithoutDevicesOrFolders) {
  ScratchDir dir;
  ModelForTest reference;
  io::save_safetensors(test::state_dict_of(reference), dir.path / "model.safetensors");
  auto model = empty_model_for_test();
  LoadCheckpointOptions o;
  o.device_map = DeviceMap{{"linear1", Device::cpu()}, {"linear2", Device::cpu()}};
  EXPECT_THROW(load_checkpoint_in_model(*model, dir.path, o), Error);  // batchnorm has no device
  o.device_map = DeviceMap{{"", Device::disk()}};
  o.dtype = DType::F16;  // must be written: needs a folder (same-dtype safetensors weights would not)
  try {
    load_checkpoint_in_model(*model, dir.path, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.hint().find("offload_folder"), std::string::npos);
  }
  EXPECT_THROW(load_checkpoint_in_model(*model, dir.path / "missing"), Error);
}

TEST(LoadCheckpointAndDispatch, ToyLlamaUnderACpuBudgetMatchesTheResidentModel) {
  ScratchDir ckpt, offload;
  nn::manual_seed(7);
  test::ToyLlama reference;
  io::save_sharded_safetensors(test::state_dict_of(reference), ckpt.path, 40000);
  Tensor ids = Tensor::from_vector<int64_t>({1, 5, 9, 2, 63, 0}, {6});
  Tensor expected = reference(ids);

  std::unique_ptr<test::ToyLlama> model;
  {
    auto guard = nn::init_empty_weights();
    model = std::make_unique<test::ToyLlama>();
  }
  const int64_t total = compute_module_sizes(*model).total();
  const int64_t budget = total * 4 / 10;
  LoadAndDispatchOptions o;
  o.device_map = std::string("auto");
  o.max_memory = MaxMemory::parse({{"cpu", std::to_string(budget)}});
  o.no_split_module_classes = {"ToyDecoderLayer"};
  o.offload_folder = offload.path;
  reset_peak_memory_stats(Device::cpu());
  const auto before = memory_stats(Device::cpu());
  auto result = load_checkpoint_and_dispatch(*model, ckpt.path, o);

  bool has_disk = false;
  for (const auto& [name, d] : result.device_map) has_disk |= d.is_disk();
  EXPECT_TRUE(has_disk) << result.device_map.to_json();
  Tensor logits = (*model)(ids);
  EXPECT_TRUE(same_values(logits, expected));
  // Weights resident on cpu between forwards (allocated + mapped views) stay within the budget.
  const auto after = memory_stats(Device::cpu());
  const int64_t resident = (after.current - before.current) + (after.mapped - before.mapped);
  EXPECT_LE(resident, budget) << "resident " << resident << " of budget " << budget;
  const int64_t block = compute_module_sizes(*model)["model.layers.0"];
  EXPECT_LE(after.peak - before.current, budget + block);
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

TEST(LoadCheckpointAndDispatch, DiskWeightsServedFromSafetensorsNeedNoOffloadFolder) {
  test::ScratchDir dir;
  test::ModelForTest reference;
  io::save_safetensors(test::state_dict_of(reference), dir.path / "model.safetensors");
  auto model = empty_model_for_test();
  LoadAndDispatchOptions o;
  o.device_map = DeviceMap{{"linear1", Device::cpu()}, {"batchnorm", Device::disk()}, {"linear2", Device::disk()}};
  load_checkpoint_and_dispatch(*model, dir.path, o);
  EXPECT_TRUE(model->linear2->parameter("weight").is_meta());
  Tensor x = test::random_input({2, 3});
  EXPECT_TRUE(test::same_values((*model)(x), reference(x)));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path), {}), 1);  // nothing written beside it
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

struct TiedHead : nn::Module {
  std::shared_ptr<nn::Linear> a, b;
  TiedHead() {
    a = register_module("a", std::make_shared<nn::Linear>(4, 4));
    b = register_module("b", std::make_shared<nn::Linear>(4, 4));
    b->register_parameter("weight", a->parameter_slot("weight"));
  }
};

TEST(LoadCheckpoint, ATiedWeightStoredOnceIsNotMissing) {
  test::ScratchDir dir;
  TiedHead reference;
  io::StateDict sd = test::state_dict_of(reference);
  sd.erase("b.weight");  // checkpoints store a tied weight once
  io::save_safetensors(sd, dir.path / "model.safetensors");
  std::unique_ptr<TiedHead> model;
  {
    auto guard = nn::init_empty_weights();
    model = std::make_unique<TiedHead>();
  }
  ScopedLogCapture logs(LogLevel::Warning);
  auto r = load_checkpoint_in_model(*model, dir.path);
  EXPECT_TRUE(r.missing_keys.empty());
  EXPECT_FALSE(logs.contains("missing"));
  EXPECT_TRUE(model->b->parameter("weight").is_same(model->a->parameter("weight")));
}

}  // namespace
}  // namespace ferry
