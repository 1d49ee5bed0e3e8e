// DeviceStagedWeights on a virtual accelerator: prefetched weights are handed over as device copies, others are
// copied when asked, a waiting copy is not made twice, and stage_on_execution_device wraps only when it should.
#include "ferry/big_modeling/device_staging.h"

#include <gtest/gtest.h>

#include "big_modeling/dispatch_support.h"

namespace ferry {
namespace {

using test::WithVirtualDevices;

class DeviceStaging : public WithVirtualDevices {};

std::shared_ptr<io::OffloadedWeightsLoader> two_weights() {
  io::StateDict sd;
  sd.set("a.weight", test::random_input({4, 8}, 1));
  sd.set("b.weight", test::random_input({16}, 2));
  return std::make_shared<io::OffloadedWeightsLoader>(std::move(sd));
}

TEST_F(DeviceStaging, PrefetchedWeightsArriveOnTheDeviceAndOthersAreCopiedWhenAsked) {
  auto inner = two_weights();
  DeviceStagedWeights staged(inner, Device::virt(0));
  EXPECT_EQ(staged.keys(), inner->keys());
  EXPECT_TRUE(staged.prefetch("a.weight"));
  EXPECT_TRUE(staged.prefetch("a.weight"));  // already waiting: not copied again
  reset_transfer_stats();
  Tensor a = staged.get("a.weight");
  EXPECT_EQ(transfer_stats().host_to_device, 0u);  // the copy was made by prefetch
  Tensor b = staged.get("b.weight");
  EXPECT_EQ(transfer_stats().host_to_device, b.nbytes());
  EXPECT_EQ(a.device(), Device::virt(0));
  EXPECT_EQ(b.device(), Device::virt(0));
  EXPECT_TRUE(test::same_values(a, inner->get("a.weight")));
  EXPECT_TRUE(test::same_values(b, inner->get("b.weight")));
  EXPECT_EQ(staged.stats().staged, 1u);
  EXPECT_EQ(staged.stats().synchronous, 1u);
  EXPECT_FALSE(staged.prefetch("no.such.weight"));
}

TEST_F(DeviceStaging, WrapsOnlyForAnAcceleratorWithPrefetch) {
  std::shared_ptr<const io::WeightsMap> w = two_weights();
  EXPECT_EQ(stage_on_execution_device(w, Device::cpu(), true), w);
  EXPECT_EQ(stage_on_execution_device(w, Device::virt(0), false), w);
  EXPECT_EQ(stage_on_execution_device(nullptr, Device::virt(0), true), nullptr);
  auto wrapped = std::dynamic_pointer_cast<const DeviceStagedWeights>(stage_on_execution_device(w, Device::virt(1), true));
  ASSERT_NE(wrapped, nullptr);
  EXPECT_EQ(wrapped->device(), Device::virt(1));
}

}  // namespace
}  // namespace ferry
