// check_device_map (Accelerate's test_check_device_map, _invalid_keys) and device_map_usage.
#include <gtest/gtest.h>

#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/linear.h"
#include "support/model_for_test.h"

namespace ferry {
namespace {

using test::ModelForTest;

DeviceMap J(const char* json) { return DeviceMap::from_json(json); }

TEST(ModuleCovers, WholeComponentPrefixesOnly) {
  EXPECT_TRUE(module_covers("", "anything.at.all"));
  EXPECT_TRUE(module_covers("", ""));
  EXPECT_TRUE(module_covers("a.1", "a.1"));
  EXPECT_TRUE(module_covers("a.1", "a.1.weight"));
  EXPECT_FALSE(module_covers("a.1", "a.10"));
  EXPECT_FALSE(module_covers("a.1", "a.10.weight"));
  EXPECT_FALSE(module_covers("a.1", "a"));
  EXPECT_FALSE(module_covers("a.1.weight", "a.1"));
  EXPECT_FALSE(module_covers("b", "a.b"));
}

TEST(CheckDeviceMap, AccelerateCases) {
  ModelForTest model;
  EXPECT_NO_THROW(check_device_map(model, J(R"({"": 0})")));
  EXPECT_THROW(check_device_map(model, J(R"({"linear1": 0, "linear2": 1})")), Error);
  EXPECT_NO_THROW(check_device_map(model, J(R"({"linear1": 0, "linear2": 1, "batchnorm": 1})")));
}

TEST(CheckDeviceMap, ErrorListsTheUncoveredTensors) {
  ModelForTest model;
  try {
    check_device_map(model, J(R"({"linear1": 0, "linear2": 1})"));
    FAIL();
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("batchnorm.weight, batchnorm.bias, batchnorm.running_mean"), std::string::npos) << what;
    EXPECT_EQ(what.find("linear1.weight"), std::string::npos) << what;
  }
  // Long lists are cut after ten names.
  auto big = test::sequential_model(20);
  try {
    check_device_map(*big, J(R"({"linear1": 0})"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("... and 28 more"), std::string::npos) << e.what();
  }
}

TEST(CheckDeviceMap, PrefixesAreWholeComponents) {
  auto model = test::sequential_model(11);
  DeviceMap map;
  for (int i = 2; i <= 11; ++i) map.set("linear" + std::to_string(i), Device::cpu());
  map.set("linear1.weight", Device::cpu());  // "linear1" is covered only through its weight
  try {
    check_device_map(*model, map);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear1.bias"), std::string::npos) << e.what();
  }
  map.set("linear1.bias", Device::disk());
  EXPECT_NO_THROW(check_device_map(*model, map));
}

TEST(CheckDeviceMap, UnknownKeysWarnAndTensorKeysDoNot) {
  ModelForTest model;
  ScopedLogCapture logs;
  check_device_map(model, J(R"({"linear1": "cpu", "batchnorm": "cpu", "linear2": "cpu", "invalid_module": 0,
                                "another_invalid": 1})"));
  EXPECT_TRUE(logs.contains("device_map keys do not match any submodules"));
  EXPECT_TRUE(logs.contains("invalid_module"));
  EXPECT_TRUE(logs.contains("another_invalid"));

  ScopedLogCapture quiet;
  check_device_map(model, J(R"({"linear1.weight": 0, "linear1.bias": 0, "batchnorm": 1, "linear2": "disk"})"));
  EXPECT_FALSE(quiet.contains("do not match"));
}

TEST(CheckDeviceMap, NonPersistentBuffersNeedNoDevice) {
  nn::Module model;
  model.register_module("lin", std::make_shared<test::LinearWithNonPersistentBuffers>(3, 4));
  model.register_module("other", std::make_shared<nn::Linear>(2, 2));
  EXPECT_NO_THROW(check_device_map(model, J(R"({"lin.weight": 0, "other": 0})")));
}

TEST(DeviceMapUsage, SumsBytesPerDevice) {
  ModelForTest model;
  MaxMemory usage = device_map_usage(model, J(R"({"linear1": 0, "batchnorm": "cpu", "linear2": "disk"})"));
  EXPECT_EQ(usage, (MaxMemory{{Device::cuda(0), 64}, {Device::cpu(), 72}, {Device::disk(), 100}}));
  MaxMemory half = device_map_usage(model, J(R"({"": 1})"), DType::F16);
  EXPECT_EQ(half, (MaxMemory{{Device::cuda(1), 122}}));
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

TEST(FormatPlan, ShowsRowsTotalsBudgetsAndReservations) {
  test::ModelForTest model;
  PlanOptions o;
  o.max_memory = MaxMemory{{Device::cuda(0), 1000}, {Device::cpu(), 5000}};
  o.dtype = DType::F16;
  o.reservations = {{Device::cuda(0), 300, "KV cache"}};
  std::string table = format_plan(model, DeviceMap::from_json(R"({"linear1": 0, "batchnorm": "cpu"})"), o);
  EXPECT_NE(table.find("module     device           bytes  dtype\n"), std::string::npos) << table;
  EXPECT_NE(table.find("linear1    cuda:0            32 B  f16\n"), std::string::npos) << table;
  EXPECT_NE(table.find("batchnorm  cpu               40 B  f16+i64\n"), std::string::npos) << table;
  EXPECT_NE(table.find("cuda:0: 32 B of weights + 300 B reserved (KV cache) of 1000 B\n"), std::string::npos) << table;
  EXPECT_NE(table.find("cpu: 40 B of weights of 4.88 KiB\n"), std::string::npos) << table;
  EXPECT_NE(table.find("no device for 2 tensor(s): linear2.weight linear2.bias"), std::string::npos) << table;
}

}  // namespace
}  // namespace ferry
