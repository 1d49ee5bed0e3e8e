// Value / Args and the walks hooks use: kinds and their errors, ordered dicts, opaque objects, send_to_device
// with skip_keys (Accelerate's utils/operations.py behaviour), find_device.
#include "ferry/nn/value.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/core/backend.h"
#include "ferry/core/error.h"

namespace ferry::nn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class VirtualDevices : public ::testing::Test {
 protected:
  void SetUp() override { enable_virtual_devices({}); }
  void TearDown() override { disable_virtual_devices(); }
};

TEST(Value, KindsAndConversions) {
  EXPECT_TRUE(Value().is_none());
  EXPECT_TRUE(Value(nullptr).is_none());
  EXPECT_EQ(Value(3).to_int(), 3);
  EXPECT_EQ(Value(int64_t{1} << 40).to_int(), int64_t{1} << 40);
  EXPECT_TRUE(Value(true).is_bool());
  EXPECT_DOUBLE_EQ(Value(2.5f).to_float(), 2.5);
  EXPECT_DOUBLE_EQ(Value(7).to_float(), 7.0);  // ints widen
  EXPECT_EQ(Value("abc").str(), "abc");         // not bool
  EXPECT_TRUE(Value(std::string_view("x")).is_string());
  EXPECT_TRUE(Value(List{1, 2}).is_list());
  EXPECT_TRUE(Value(Tensor::zeros({2}, DType::F32)).is_tensor());
}

TEST(Value, WrongKindThrowsNamingBoth) {
  Value v(3);
  try {
    (void)v.tensor();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("expected Tensor, got int 3"));
  }
  EXPECT_THROW((void)v.str(), Error);
  EXPECT_THROW((void)Value("x").to_float(), Error);
  EXPECT_THROW((void)Value().list(), Error);
}

TEST(Dict, KeepsInsertionOrderAndReplacesInPlace) {
  Dict d{{"b", 1}, {"a", 2}};
  d.set("c", 3);
  d.set("b", 10);
  EXPECT_THAT(d.keys(), ElementsAre("b", "a", "c"));
  EXPECT_EQ(d.at("b").to_int(), 10);
  EXPECT_TRUE(d.erase("a"));
  EXPECT_FALSE(d.erase("a"));
  EXPECT_EQ(d.find("a"), nullptr);
  try {
    d.at("zz");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("\"b\", \"c\""));
  }
}

struct Cache {
  int tokens = 0;
};

TEST(Object, TypedAccessIsChecked) {
  auto cache = std::make_shared<Cache>();
  Value v(Object::make(cache, "KVCache"));
  EXPECT_EQ(v.object().get<Cache>().get(), cache.get());
  EXPECT_TRUE(v.object().holds<Cache>());
  EXPECT_FALSE(v.object().holds<int>());
  EXPECT_THROW(v.object().get<int>(), Error);
  EXPECT_THAT(v.describe(), HasSubstr("KVCache"));
  Value copy = v;  // shared, not copied
  copy.object().get<Cache>()->tokens = 5;
  EXPECT_EQ(cache->tokens, 5);
}

TEST(Args, PositionalNamedAndTensorArg) {
  Tensor x = Tensor::zeros({1}, DType::F32);
  Args a{x};
  a.with("mask", Tensor::zeros({1}, DType::Bool)).with("use_cache", true);
  EXPECT_EQ(a.size(), 1u);
  EXPECT_TRUE(a[0].tensor().is_same(x));
  EXPECT_THROW(a[1], Error);
  EXPECT_TRUE(a.kwarg("use_cache")->to_bool());
  EXPECT_EQ(a.kwarg("nope"), nullptr);
  EXPECT_TRUE(a.tensor_arg(0, "input")->is_same(x));
  EXPECT_EQ(a.tensor_arg(1, "mask")->dtype(), DType::Bool);
  EXPECT_EQ(a.tensor_arg(2, "absent"), nullptr);
}

TEST_F(VirtualDevices, SendToDeviceWalksListsAndDictsAndHonoursSkipKeys) {
  const Device dev = Device::virt(0);
  Tensor a = Tensor::from_vector<float>({1, 2}, {2});
  Tensor b = Tensor::from_vector<float>({3}, {1});
  auto cache = std::make_shared<Cache>();
  Value v(Dict{{"x", List{a, 4, "s"}}, {"past_key_values", b}, {"nested", Dict{{"past_key_values", b}, {"y", b}}},
               {"cache", Object::make(cache, "Cache")}});
  Value moved = send_to_device(v, dev, {"past_key_values"});
  const Dict& d = moved.dict();
  EXPECT_EQ(d.at("x").list()[0].tensor().device(), dev);
  EXPECT_EQ(d.at("x").list()[0].tensor().to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(d.at("x").list()[1].to_int(), 4);
  EXPECT_TRUE(d.at("past_key_values").tensor().is_same(b));  // skipped: the very same tensor
  EXPECT_TRUE(d.at("nested").dict().at("past_key_values").tensor().is_same(b));
  EXPECT_EQ(d.at("nested").dict().at("y").tensor().device(), dev);
  EXPECT_EQ(d.at("cache").object().get<Cache>().get(), cache.get());
  // The input is untouched.
  EXPECT_TRUE(v.dict().at("x").list()[0].tensor().is_same(a));
}

TEST_F(VirtualDevices, SendArgsSkipsNamedKeysOnly) {
  const Device dev = Device::virt(1);
  Tensor a = Tensor::from_vector<float>({1}, {1});
  Args args(List{a}, Dict{{"past_key_values", a}, {"mask", a}});
  Args out = send_to_device(args, dev, {"past_key_values"});
  EXPECT_EQ(out[0].tensor().device(), dev);
  EXPECT_EQ(out.kwarg("mask")->tensor().device(), dev);
  EXPECT_TRUE(out.kwarg("past_key_values")->tensor().is_same(a));
  EXPECT_THAT(out.kwargs.keys(), ElementsAre("past_key_values", "mask"));
}

TEST_F(VirtualDevices, FindDeviceReturnsTheFirstTensorsDevice) {
  EXPECT_EQ(find_device(Value(3)), std::nullopt);
  EXPECT_EQ(find_device(Value(List{1, Dict{{"a", "x"}}})), std::nullopt);
  Tensor on_virt = Tensor::zeros({1}, DType::F32, Device::virt(1));
  Tensor on_cpu = Tensor::zeros({1}, DType::F32);
  EXPECT_EQ(find_device(Value(List{2, Dict{{"a", on_virt}}, on_cpu})), Device::virt(1));
  Args args(List{5}, Dict{{"x", on_cpu}});
  EXPECT_EQ(find_device(args), Device::cpu());
  EXPECT_EQ(find_device(Args{}), std::nullopt);
}

}  // namespace
}  // namespace ferry::nn
