// dispatch_model, cpu_offload, disk_offload, cpu_offload_with_hook — after Accelerate's test_big_modeling.py:
// every dispatch mode gives outputs bit-exact equal to the resident model (cpu, no dtype change).
#include "ferry/big_modeling/dispatch.h"

#include <gtest/gtest.h>

#include "dispatch_support.h"
#include "ferry/big_modeling/attach.h"
#include "ferry/big_modeling/cpu_offload.h"
#include "ferry/core/logging.h"
#include "ferry/core/memory.h"
#include "ferry/io/offload.h"
#include "ferry/io/safetensors.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/hooks.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/module_tensors.h"
#include "ferry/nn/tied.h"
#include "support/model_for_test.h"

namespace ferry {
namespace {

using test::ModelForTest;
using test::same_values;
using test::ScratchDir;

class Dispatch : public test::WithVirtualDevices {};

void expect_state_dicts_equal(const nn::Module& offloaded, const nn::Module& original) {
  auto a = get_state_dict_offloaded_model(const_cast<nn::Module&>(offloaded));
  auto b = original.state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a.items()[i].first, b[i].first);
    EXPECT_TRUE(same_values(a.items()[i].second, b[i].second)) << b[i].first;
  }
}

TEST_F(Dispatch, CpuOffloadMatchesResidentAndKeepsWeightsOnMeta) {
  ModelForTest model, reference;
  io::StateDict sd = test::state_dict_of(reference);
  for (auto& [name, t] : sd) nn::set_module_tensor_to_device(model, name, Device::cpu(), t.clone());
  Tensor x = test::random_input({3, 3});
  Tensor expected = reference(x);
  cpu_offload(model, Device::virt(0));
  EXPECT_TRUE(model.linear1->parameter("weight").is_meta());
  Tensor out = model(x);
  EXPECT_EQ(out.device(), Device::cpu());  // io_same_device on the root
  EXPECT_TRUE(same_values(out, expected));
  EXPECT_TRUE(model.linear2->parameter("weight").is_meta());
  EXPECT_EQ(memory_stats(Device::virt(0)).current, 72 - 32);  // only the batchnorm buffers stay resident
  expect_state_dicts_equal(model, reference);
  nn::remove_hook_from_module(model, true);
  EXPECT_TRUE(same_values(model(x), expected));
}

TEST_F(Dispatch, CpuOffloadWithOffloadBuffersAndPreloadClasses) {
  ModelForTest reference;
  Tensor x = test::random_input({2, 3});
  Tensor expected = reference(x);
  // Preload: one hook for the whole ModelForTest, loading all of its weights at once.
  ModelForTest m;
  for (auto& [name, t] : reference.state_dict()) nn::set_module_tensor_to_device(m, name, Device::cpu(), t.clone());
  cpu_offload(m, Device::virt(1), /*offload_buffers=*/true, std::nullopt, {"ModelForTest"});
  EXPECT_TRUE(m.batchnorm->buffer("running_mean").is_meta());
  EXPECT_FALSE(m.linear1->hook());  // the preload hook on m covers its children
  EXPECT_TRUE(same_values(m(x), expected));
}

TEST_F(Dispatch, DiskOffloadWritesAFolderAndServesFromIt) {
  ScratchDir dir;
  ModelForTest model, reference;
  for (auto& [name, t] : reference.state_dict()) nn::set_module_tensor_to_device(model, name, Device::cpu(), t.clone());
  Tensor x = test::random_input({2, 3});
  Tensor expected = reference(x);
  disk_offload(model, dir.path, Device::cpu());
  EXPECT_TRUE(std::filesystem::exists(dir.path / "index.json"));
  EXPECT_TRUE(std::filesystem::exists(dir.path / "linear1.weight.dat"));
  EXPECT_TRUE(same_values(model(x), expected));
  EXPECT_TRUE(model.linear1->parameter("weight").is_meta());

  // A model built empty runs from the same folder.
  ModelForTest empty;
  for (auto& [name, t] : empty.state_dict()) nn::set_module_tensor_to_device(empty, name, Device::meta());
  disk_offload(empty, dir.path, Device::cpu(), /*offload_buffers=*/true);
  EXPECT_TRUE(same_values(empty(x), expected));
}

TEST_F(Dispatch, DiskOffloadStraightFromASafetensorsCheckpoint) {
  ScratchDir dir;
  ModelForTest reference, empty;
  io::save_safetensors(test::state_dict_of(reference), dir.path / "model.safetensors");
  for (auto& [name, t] : empty.state_dict()) nn::set_module_tensor_to_device(empty, name, Device::meta());
  Tensor x = test::random_input({2, 3});
  disk_offload(empty, dir.path, Device::virt(0), /*offload_buffers=*/true);
  EXPECT_FALSE(std::filesystem::exists(dir.path / "index.json"));  // nothing copied
  EXPECT_TRUE(same_values(empty(x), reference(x)));
}

TEST_F(Dispatch, DiskOffloadOfAnEmptyModelWithoutWeightsIsAClearError) {
  ScratchDir dir;
  ModelForTest empty;
  for (auto& [name, t] : empty.state_dict()) nn::set_module_tensor_to_device(empty, name, Device::meta());
  try {
    disk_offload(empty, dir.path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("neither an offload index.json nor a safetensors checkpoint"),
              std::string::npos);
  }
}

TEST_F(Dispatch, MixedMapsGiveTheResidentOutput) {
  ScratchDir dir;
  ModelForTest reference;
  Tensor x = test::random_input({4, 3});
  Tensor expected = reference(x);
  const std::vector<DeviceMap> maps = {
      {{"linear1", Device::virt(0)}, {"batchnorm", Device::cpu()}, {"linear2", Device::virt(1)}},
      {{"linear1", Device::cpu()}, {"batchnorm", Device::disk()}, {"linear2", Device::virt(1)}},
      {{"linear1", Device::disk()}, {"batchnorm", Device::cpu()}, {"linear2", Device::disk()}},
      {{"linear1", Device::virt(1)}, {"batchnorm", Device::virt(0)}, {"linear2", Device::virt(1)}},
  };
  for (bool offload_buffers : {false, true}) {
    for (const auto& map : maps) {
      ModelForTest model;
      for (auto& [name, t] : reference.state_dict()) nn::set_module_tensor_to_device(model, name, Device::cpu(), t.clone());
      ScratchDir offload;
      DispatchOptions o;
      o.offload_dir = offload.path;
      o.offload_buffers = offload_buffers;
      dispatch_model(model, map, o);
      Tensor out = model(x);
      EXPECT_EQ(out.device(), Device::cpu()) << map.to_json();
      EXPECT_TRUE(same_values(out, expected)) << map.to_json();
      EXPECT_TRUE(same_values(model(x), expected)) << "second call " << map.to_json();
      for (const auto& [name, device] : map)
        if (device.is_disk()) {
          EXPECT_TRUE(model.get_submodule(name).parameter("weight").is_meta()) << name;
        }
      expect_state_dicts_equal(model, reference);
    }
  }
}

TEST_F(Dispatch, SingleDeviceIsAPlainMoveUnlessForced) {
  ModelForTest model;
  dispatch_model(model, DeviceMap{{"", Device::virt(0)}});
  EXPECT_FALSE(model.hook());
  EXPECT_EQ(model.linear1->parameter("weight").device(), Device::virt(0));
  ModelForTest forced;
  DispatchOptions o;
  o.force_hooks = true;
  Tensor x = test::random_input({2, 3});
  Tensor expected = forced(x);
  dispatch_model(forced, DeviceMap{{"", Device::virt(1)}}, o);
  EXPECT_TRUE(forced.hook());
  Tensor out = forced(x);
  EXPECT_EQ(out.device(), Device::cpu());
  EXPECT_TRUE(same_values(out, expected));
}

TEST_F(Dispatch, IncompleteMapsAndMissingOffloadDirFailBeforeAnythingMoves) {
  ModelForTest model;
  EXPECT_THROW(dispatch_model(model, DeviceMap{{"linear1", Device::cpu()}, {"linear2", Device::virt(0)}}), Error);
  EXPECT_EQ(model.linear2->parameter("weight").device(), Device::cpu());
  try {
    dispatch_model(model, DeviceMap{{"linear1", Device::virt(0)}, {"batchnorm", Device::disk()}, {"linear2", Device::disk()}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batchnorm, linear2"), std::string::npos) << e.what();
  }
}

TEST_F(Dispatch, MovingAnOffloadedModelIsAnError) {
  ModelForTest model;
  dispatch_model(model, DeviceMap{{"linear1", Device::virt(0)}, {"batchnorm", Device::cpu()}, {"linear2", Device::cpu()}});
  try {
    model.to(Device::cpu());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("offloaded"), std::string::npos);
  }
  ModelForTest resident;
  dispatch_model(resident, DeviceMap{{"linear1", Device::virt(0)}, {"batchnorm", Device::virt(1)}, {"linear2", Device::virt(1)}});
  ScopedLogCapture logs(LogLevel::Warning);
  resident.to(Device::virt(0));  // allowed, with a warning
  EXPECT_TRUE(logs.contains("shouldn't move a model"));
}

TEST_F(Dispatch, NonPersistentBuffersStayOnTheExecutionDevice) {
  test::LinearWithNonPersistentBuffers reference(3, 4);
  Tensor x = test::random_input({2, 3});
  Tensor expected = reference(x);
  test::LinearWithNonPersistentBuffers model(3, 4);
  cpu_offload(model, Device::virt(0), /*offload_buffers=*/true);
  EXPECT_TRUE(model.buffer("weight").is_meta());
  EXPECT_EQ(model.buffer("bias").device(), Device::virt(0));  // non-persistent: never offloaded
  EXPECT_TRUE(same_values(model(x), expected));
}

// Two Linear(4, 4) sharing one weight: dispatch keeps the tie (identity) and never duplicates the bytes.
struct TiedPair : nn::Module {
  std::shared_ptr<nn::Linear> a, b;
  TiedPair() {
    a = register_module("a", std::make_shared<nn::Linear>(4, 4));
    b = register_module("b", std::make_shared<nn::Linear>(4, 4));
    b->register_parameter("weight", a->parameter_slot("weight"));
  }
  std::string type_name() const override { return "TiedPair"; }
  nn::Value forward(const nn::Args& args) override { return (*b)((*a)(args[0].tensor())); }
};

TEST_F(Dispatch, TiedWeightsStayTiedAndAreNotDuplicated) {
  TiedPair model;
  Tensor x = test::random_input({2, 4});
  Tensor expected = model(x);
  dispatch_model(model, DeviceMap{{"a", Device::virt(0)}, {"b", Device::virt(0)}}, {.force_hooks = true});
  EXPECT_TRUE(model.a->parameter("weight").is_same(model.b->parameter("weight")));
  EXPECT_EQ(memory_stats(Device::virt(0)).current, 16 * 4 + 2 * 4 * 4);  // one weight, two biases
  EXPECT_TRUE(same_values(model(x), expected));
  EXPECT_EQ(nn::find_tied_parameters(model), (std::vector<std::vector<std::string>>{{"a.weight", "b.weight"}}));

  TiedPair offloaded;
  Tensor expected2 = offloaded(x);
  dispatch_model(offloaded, DeviceMap{{"a", Device::cpu()}, {"b", Device::cpu()}}, {.main_device = Device::virt(1)});
  EXPECT_TRUE(offloaded.a->parameter("weight").is_same(offloaded.b->parameter("weight")));
  EXPECT_TRUE(same_values(offloaded(x), expected2));
  EXPECT_EQ(memory_stats(Device::virt(1)).current, 0);
}

// Issue 14: a checkpoint or offload folder stores a tied weight once (here under "a.weight", as save_pretrained
// keeps model.embed_tokens.weight and drops lm_head.weight); b's hook asks for "b.weight". Every offloading mode reads
// it through the tie: dispatch_model (disk and cpu offload), cpu_offload with a state dict, disk_offload from an
// offload folder and straight from a safetensors checkpoint. The folder may also hold both names (Accelerate's
// disk_offload writes torch's state_dict, which lists a tied tensor under each name): the stored copy is used.
io::StateDict without_second_name(const nn::Module& model) {
  io::StateDict sd;
  for (const auto& [name, t] : model.state_dict())
    if (name != "b.weight") sd.set(name, t.clone());
  return sd;
}

void make_meta(nn::Module& m) {
  for (auto& [name, t] : m.state_dict()) nn::set_module_tensor_to_device(m, name, Device::meta());
}

TEST_F(Dispatch, TiedWeightStoredUnderOneNameServesBothModulesInEveryOffloadMode) {
  TiedPair reference;
  Tensor x = test::random_input({2, 4});
  const Tensor expected = reference(x);
  const io::StateDict stored = without_second_name(reference);
  ASSERT_FALSE(stored.contains("b.weight"));

  {  // dispatch_model, both on disk, from an offload index written by load_checkpoint_in_model (one name)
    ScratchDir dir;
    io::offload_state_dict(dir.path, stored);
    TiedPair m;
    make_meta(m);
    dispatch_model(m, DeviceMap{{"a", Device::disk()}, {"b", Device::disk()}},
                   {.offload_dir = dir.path, .offload_index = io::load_offload_index(dir.path)});
    EXPECT_TRUE(same_values(m(x), expected)) << "dispatch_model, disk";
    EXPECT_TRUE(same_values(m(x), expected)) << "dispatch_model, disk, second forward";
  }
  {  // dispatch_model, both offloaded to cpu with a state dict holding one name
    TiedPair m;
    make_meta(m);
    dispatch_model(m, DeviceMap{{"a", Device::cpu()}, {"b", Device::cpu()}},
                   {.main_device = Device::virt(0), .state_dict = stored, .force_hooks = true});
    EXPECT_TRUE(same_values(m(x), expected)) << "dispatch_model, cpu offload";
  }
  {  // cpu_offload with a state dict holding one name
    TiedPair m;
    make_meta(m);
    cpu_offload(m, Device::virt(1), false, stored);
    EXPECT_TRUE(same_values(m(x), expected)) << "cpu_offload";
  }
  {  // disk_offload from an offload folder holding one name, and from one holding both
    for (const bool both : {false, true}) {
      ScratchDir dir;
      io::StateDict sd = stored;
      if (both) sd.set("b.weight", reference.b->parameter("weight").clone());
      io::offload_state_dict(dir.path, sd);
      TiedPair m;
      make_meta(m);
      disk_offload(m, dir.path, Device::cpu());
      EXPECT_TRUE(same_values(m(x), expected)) << "disk_offload, offload folder, both names: " << both;
    }
  }
  {  // disk_offload straight from a safetensors checkpoint
    ScratchDir dir;
    io::save_safetensors(stored, dir.path / "model.safetensors");
    TiedPair m;
    make_meta(m);
    disk_offload(m, dir.path, Device::virt(0));
    EXPECT_TRUE(same_values(m(x), expected)) << "disk_offload, checkpoint";
  }
}

TEST(AliasedWeightsMap, ReadsAliasesThroughTheirTargetAndRefusesDanglingOnes) {
  io::StateDict sd;
  sd.set("w", Tensor::from_vector(std::vector<float>{1, 2}, {2}));
  auto base = std::make_shared<io::OffloadedWeightsLoader>(sd);
  io::AliasedWeightsMap m(base, {{"v", "w"}});
  EXPECT_TRUE(m.contains("v"));
  EXPECT_TRUE(same_values(m.get("v"), m.get("w")));
  EXPECT_EQ(m.keys(), (std::vector<std::string>{"w", "v"}));
  EXPECT_FALSE(m.contains("u"));
  EXPECT_THROW(io::AliasedWeightsMap(base, {{"u", "missing"}}), Error);
  // A key the map has itself is never redirected.
  sd.set("v", Tensor::from_vector(std::vector<float>{3, 4}, {2}));
  io::AliasedWeightsMap own(std::make_shared<io::OffloadedWeightsLoader>(sd), {{"v", "w"}});
  EXPECT_EQ(own.get("v").to_vector<float>(), (std::vector<float>{3, 4}));
}

// Issue 21: disk_offload and dispatch_model with direct (O_DIRECT, staged) reads give the resident output, from an
// offload folder and straight from a safetensors checkpoint.
TEST_F(Dispatch, DirectDiskReadsGiveTheResidentOutputInEveryDiskMode) {
  ModelForTest reference;
  Tensor x = test::random_input({2, 3});
  const Tensor expected = reference(x);
  {
    ScratchDir dir;
    io::offload_state_dict(dir.path, test::state_dict_of(reference));
    ModelForTest m;
    make_meta(m);
    disk_offload(m, dir.path, Device::cpu(), /*offload_buffers=*/true, {}, 2, OffloadIo::Direct);
    EXPECT_TRUE(same_values(m(x), expected)) << "disk_offload, offload folder";
    EXPECT_TRUE(same_values(m(x), expected)) << "disk_offload, offload folder, again";
  }
  {
    ScratchDir dir;
    io::save_safetensors(test::state_dict_of(reference), dir.path / "model.safetensors");
    ModelForTest m;
    make_meta(m);
    disk_offload(m, dir.path, Device::virt(0), /*offload_buffers=*/true, {}, 0, OffloadIo::Direct);
    EXPECT_TRUE(same_values(m(x), expected)) << "disk_offload, checkpoint";
  }
  {
    ScratchDir dir;
    auto reader = std::make_shared<io::StagedReader>();
    ModelForTest m;
    for (auto& [name, t] : reference.state_dict()) nn::set_module_tensor_to_device(m, name, Device::cpu(), t.clone());
    dispatch_model(m, DeviceMap{{"linear1", Device::disk()}, {"batchnorm", Device::cpu()}, {"linear2", Device::disk()}},
                   {.offload_dir = dir.path, .staged_reader = reader});
    EXPECT_TRUE(same_values(m(x), expected)) << "dispatch_model";
    EXPECT_EQ(reader->stats().tensors, 4u);  // two weights, two biases
  }
}

TEST_F(Dispatch, PrefixesMatchWholeComponents) {
  auto model = test::sequential_model(11);  // linear1 .. linear11: "linear1" must not capture "linear10"
  Tensor x = test::random_input({2, 4});
  Tensor expected = (*model)(x);
  ScratchDir dir;
  DeviceMap map;
  for (int i = 1; i <= 11; ++i) map.set("linear" + std::to_string(i), i == 1 ? Device::disk() : Device::virt(0));
  dispatch_model(*model, map, {.offload_dir = dir.path});
  EXPECT_TRUE(model->get_submodule("linear1").parameter("weight").is_meta());
  EXPECT_EQ(model->get_submodule("linear10").parameter("weight").device(), Device::virt(0));
  EXPECT_FALSE(std::filesystem::exists(dir.path / "linear10.weight.dat"));
  EXPECT_TRUE(same_values((*model)(x), expected));
}

TEST_F(Dispatch, CpuOffloadWithHookChainsModels) {
  ModelForTest m1, m2;
  Tensor x = test::random_input({2, 3});
  auto h1 = cpu_offload_with_hook(m1, Device::virt(0));
  auto h2 = cpu_offload_with_hook(m2, Device::virt(0), h1);
  EXPECT_EQ(m1.linear1->parameter("weight").device(), Device::cpu());
  m1(x);
  EXPECT_EQ(m1.linear1->parameter("weight").device(), Device::virt(0));  // stays after the forward
  m2(test::random_input({2, 3}));
  EXPECT_EQ(m1.linear1->parameter("weight").device(), Device::cpu());    // running m2 offloaded m1
  EXPECT_EQ(m2.linear1->parameter("weight").device(), Device::virt(0));
  h2->offload();
  EXPECT_EQ(m2.linear1->parameter("weight").device(), Device::cpu());
  h2->remove();
  EXPECT_FALSE(m2.hook());
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

TEST(DispatchChecks, NestedEntriesAndSplitTiesAreRefusedWithNames) {
  test::ScratchDir dir;
  test::ModelForTest model;
  try {
    dispatch_model(model, DeviceMap{{"", Device::cpu()}, {"linear2", Device::disk()}}, {.offload_dir = dir.path});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested inside"), std::string::npos) << e.what();
  }
  TiedPair tied;
  try {
    dispatch_model(tied, DeviceMap{{"a", Device::cpu()}, {"b", Device::disk()}}, {.offload_dir = dir.path});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a.weight and b.weight"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(tied.a->parameter("weight").is_meta());  // refused before anything moved
}

}  // namespace
}  // namespace ferry
