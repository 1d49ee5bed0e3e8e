// get_balanced_memory (Accelerate's test_get_balanced_memory and _no_split_module_classes_set), low_zero, the
// device_map modes as load_checkpoint_and_dispatch resolves them, and reservations.
#include <gtest/gtest.h>

#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/linear.h"
#include "support/error_of.h"
#include "support/model_for_test.h"

namespace ferry {
namespace {

using test::ModelForTest;

MaxMemory M(const char* json) { return MaxMemory::from_json(json); }
DeviceMap J(const char* json) { return DeviceMap::from_json(json); }

TEST(GetBalancedMemory, AccelerateCases) {
  ModelForTest model;  // 236 bytes: linear1 64, batchnorm 72, linear2 100
  EXPECT_EQ(get_balanced_memory(model, M(R"({"0": 200, "1": 200})")), M(R"({"0": 200, "1": 200})"));
  // A non-contiguous set of GPUs works.
  EXPECT_EQ(get_balanced_memory(model, M(R"({"0": 200, "2": 200})")), M(R"({"0": 200, "2": 200})"));
  // 236 / 2 + int(1.25 × mean leaf module 78) = 118 + 97.
  EXPECT_EQ(get_balanced_memory(model, M(R"({"0": 300, "1": 300})")), M(R"({"0": 215, "1": 300})"));
  // The last GPU always keeps all its memory.
  EXPECT_EQ(get_balanced_memory(model, M(R"({"0": 300, "1": 500})")), M(R"({"0": 215, "1": 500})"));
  EXPECT_EQ(get_balanced_memory(model, M(R"({"0": 300, "cpu": 1000})")), M(R"({"0": 300, "cpu": 1000})"));
  // A GPU with no memory does not count.
  EXPECT_EQ(get_balanced_memory(model, M(R"({"0": 0, "1": 300, "2": 300})")), M(R"({"0": 0, "1": 215, "2": 300})"));
  EXPECT_EQ(get_balanced_memory(model, M(R"({"0": 0, "cpu": 100})")), M(R"({"0": 0, "cpu": 100})"));
  EXPECT_EQ(get_balanced_memory(model, M(R"({"cpu": 100})")), M(R"({"cpu": 100})"));
}

TEST(GetBalancedMemory, NoSplitClassesSetTheMargin) {
  ModelForTest model;
  // The first no-split module met is linear1 (64): margin = max(64, 78) → same as without.
  EXPECT_EQ(get_balanced_memory(model, M(R"({"0": 300, "1": 300})"), {"Linear"}), M(R"({"0": 215, "1": 300})"));
  // BatchNorm1d (72) < 78 too; a whole ModelForTest block (236) would dominate.
  auto three = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<ModelForTest>(), std::make_shared<ModelForTest>(), std::make_shared<ModelForTest>()});
  // 708 / 2 + int(1.25 × 236) = 354 + 295.
  EXPECT_EQ(get_balanced_memory(*three, M(R"({"0": 1000, "1": 1000})"), {"ModelForTest"}),
            M(R"({"0": 649, "1": 1000})"));
  // Without no-split: mean leaf module 78 → 354 + 97.
  EXPECT_EQ(get_balanced_memory(*three, M(R"({"0": 1000, "1": 1000})")), M(R"({"0": 451, "1": 1000})"));
}

TEST(GetBalancedMemory, LowZeroGivesGpuZeroOnlyWhatTheOthersCannotHold) {
  auto three = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<ModelForTest>(), std::make_shared<ModelForTest>(), std::make_shared<ModelForTest>()});
  // n = 3 GPUs, per_gpu = 708 / 2 + 97 = 451: GPU 0 keeps its max in the loop, GPU 1 is capped at 451, GPU 2
  // keeps 1000; then GPU 0 = min(max(0, 708 − 1451), 1000) = 0.
  EXPECT_EQ(get_balanced_memory(*three, M(R"({"0": 1000, "1": 1000, "2": 1000})"), {}, std::nullopt, {}, true),
            M(R"({"0": 0, "1": 451, "2": 1000})"));
  // When the others are small, GPU 0 takes the rest: 708 − (300 + 200) = 208.
  EXPECT_EQ(get_balanced_memory(*three, M(R"({"0": 1000, "1": 300, "2": 200})"), {}, std::nullopt, {}, true),
            M(R"({"0": 208, "1": 300, "2": 200})"));
  // One GPU: low_zero has nothing to move to and is ignored.
  EXPECT_EQ(get_balanced_memory(*three, M(R"({"0": 1000, "cpu": 5000})"), {}, std::nullopt, {}, true),
            M(R"({"0": 1000, "cpu": 5000})"));
  // Ferry's fix: GPU ids need not be 0..n-1 (Accelerate raises a KeyError here).
  EXPECT_EQ(get_balanced_memory(*three, M(R"({"1": 1000, "3": 300, "5": 200})"), {}, std::nullopt, {}, true),
            M(R"({"1": 208, "3": 300, "5": 200})"));
}

TEST(GetBalancedMemory, LoneDetectedGpuGetsNinetyPercent) {
  if (find_backend(Device::Kind::CUDA) != nullptr) GTEST_SKIP() << "needs a machine without CUDA GPUs";
  VirtualDeviceOptions options;
  options.count = 1;
  options.capacity_bytes = 1000000;
  enable_virtual_devices(options);
  ModelForTest model;
  MaxMemory detected = get_max_memory();
  MaxMemory balanced = get_balanced_memory(model);
  disable_virtual_devices();
  int64_t full = *detected.get(Device::virt(0));
  EXPECT_EQ(*balanced.get(Device::virt(0)), static_cast<int64_t>(full * 0.9));
  EXPECT_TRUE(balanced.contains(Device::cpu()));
}

TEST(DeviceMapModes, ParseAndNames) {
  for (const char* mode : {"auto", "balanced", "balanced_low_0", "sequential"})
    EXPECT_EQ(device_map_mode_name(parse_device_map_mode(mode)), mode);
  try {
    parse_device_map_mode("balanced_low_1");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'balanced_low_1'"), std::string::npos);
    EXPECT_NE(e.hint().find("sequential"), std::string::npos);
  }
}

TEST(DeviceMapModes, ResolveLikeLoadCheckpointAndDispatch) {
  auto three = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<ModelForTest>(), std::make_shared<ModelForTest>(), std::make_shared<ModelForTest>()});
  PlanOptions o;
  o.max_memory = M(R"({"0": 1000, "1": 1000})");
  o.no_split_module_classes = {"ModelForTest"};
  // sequential fills GPU 0 first: it keeps one block (236) back while blocks remain, and the last block needs no
  // reserve, so everything fits.
  EXPECT_EQ(plan_device_map(*three, DeviceMapMode::Sequential, o), J(R"({"": 0})"));
  // auto spreads: GPU 0 is capped at 649 (708 / 2 + 1.25 × 236), which leaves room for one block beside the reserve.
  EXPECT_EQ(plan_device_map(*three, DeviceMapMode::Auto, o), J(R"({"0": 0, "1": 1, "2": 1})"));
  EXPECT_EQ(plan_device_map(*three, DeviceMapMode::Balanced, o),
            infer_auto_device_map(*three, [&] {
              PlanOptions b = o;
              b.max_memory = get_balanced_memory(*three, o.max_memory, o.no_split_module_classes);
              return b;
            }()));
  // balanced_low_0 with two GPUs puts everything it can on GPU 1.
  EXPECT_EQ(plan_device_map(*three, DeviceMapMode::BalancedLow0, o), J(R"({"": 1})"));
}

TEST(Reservations, ComeOffTheBudgetBeforePlanning) {
  ModelForTest model;
  PlanOptions o;
  o.max_memory = M(R"({"0": 300, "1": 200})");
  EXPECT_EQ(infer_auto_device_map(model, o), J(R"({"": 0})"));
  o.reservations = {{Device::cuda(0), 100, "KV cache"}};
  // GPU 0 now has 200: as in Accelerate's first case, only linear1 stays there.
  EXPECT_EQ(infer_auto_device_map(model, o), J(R"({"linear1": 0, "batchnorm": 1, "linear2": 1})"));
  o.reservations.push_back({Device::cuda(0), 150, "activations"});
  // 50 left on GPU 0: nothing fits after keeping the largest layer, GPU 1 takes what it can, then disk.
  DeviceMap map = infer_auto_device_map(model, o);
  EXPECT_EQ(map.device_for("linear1.weight"), Device::cuda(1));
  EXPECT_FALSE(map.devices().empty());
  for (const auto& [name, device] : map) EXPECT_NE(device, Device::cuda(0)) << name;
}

TEST(Reservations, ImpossibleReservationsAreErrorsWithTheNumbers) {
  ModelForTest model;
  PlanOptions o;
  o.max_memory = M(R"({"0": 300})");
  o.reservations = {{Device::cuda(0), 200, "KV cache for 4096 tokens"}, {Device::cuda(0), 150, "activations"}};
  try {
    infer_auto_device_map(model, o);
    FAIL();
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("KV cache for 4096 tokens (200 B) + activations (150 B)"), std::string::npos) << what;
    EXPECT_NE(what.find("needs 350 B on cuda:0 but its budget is 300 B"), std::string::npos) << what;
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory) << what;
  }
  // Reservations that make no sense are bad values, not a lack of memory.
  o.reservations = {{Device::cuda(1), 10, "KV cache"}};
  EXPECT_EQ(test::error_kind_of([&] { infer_auto_device_map(model, o); }),  // cuda:1 is not in the budget
            ErrorKind::InvalidValue);
  o.reservations = {{Device::cuda(0), -1, "KV cache"}};
  EXPECT_EQ(test::error_kind_of([&] { infer_auto_device_map(model, o); }), ErrorKind::InvalidValue);
}

TEST(Reservations, WithoutDiskAModelThatCannotFitFailsBeforePlanning) {
  ModelForTest model;  // 236 bytes, 122 in f16
  PlanOptions o;
  o.allow_disk = false;
  o.max_memory = M(R"({"0": 150, "cpu": 100})");
  o.reservations = {{Device::cuda(0), 50, "KV cache"}};
  try {
    infer_auto_device_map(model, o);
    FAIL();
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("the model needs 236 B (236 bytes) but the devices can hold only 200 B"), std::string::npos)
        << what;
    EXPECT_NE(what.find("cuda:0=100 B, cpu=100 B"), std::string::npos) << what;
    EXPECT_NE(what.find("after reserving 50 B on cuda:0 for KV cache"), std::string::npos) << what;
    EXPECT_NE(what.find("disk offload is off"), std::string::npos) << what;
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory) << what;
  }
  // In f16 it fits: 122 bytes. GPU 0 (100) keeps the largest layer (linear2, 50) back for the cpu layers, so it
  // holds linear1 (32) only; the cpu is the last device and needs no reserve for batchnorm + linear2 (90).
  o.dtype = DType::F16;
  DeviceMap map = infer_auto_device_map(model, o);
  EXPECT_EQ(map, J(R"({"linear1": 0, "batchnorm": "cpu", "linear2": "cpu"})"));
}

TEST(Reservations, WithoutDiskTheLastDeviceKeepsNoReserve) {
  ModelForTest model;
  PlanOptions o;
  o.allow_disk = false;
  o.max_memory = M(R"({"cpu": 236})");
  EXPECT_EQ(infer_auto_device_map(model, o), J(R"({"": "cpu"})"));
  o.max_memory = M(R"({"0": 236})");
  EXPECT_EQ(infer_auto_device_map(model, o), J(R"({"": 0})"));
  // Fits in total but not in pieces: GPU 0 keeps the largest layer back for the cpu layers, so the cpu must take
  // batchnorm + linear2 (172) and has only 150.
  o.max_memory = M(R"({"0": 200, "cpu": 150})");
  try {
    infer_auto_device_map(model, o);
    FAIL();
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("does not fit without disk offload"), std::string::npos) << what;
    EXPECT_NE(what.find("'linear2'"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda:0: 64 B placed + 100 B kept free for the largest offloaded layer of 200 B; cpu: 72 B "
                        "placed of 150 B"),
              std::string::npos)
        << what;
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory) << what;
  }
}

}  // namespace
}  // namespace ferry
