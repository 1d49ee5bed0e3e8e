// clean_device_map: Accelerate's test_clean_device_map cases plus ordering and edge cases.
#include <gtest/gtest.h>

#include "ferry/big_modeling/device_map.h"

namespace ferry {
namespace {

DeviceMap J(const char* json) { return DeviceMap::from_json(json); }

TEST(CleanDeviceMap, AccelerateCases) {
  // Regroup everything if all is on the same device.
  EXPECT_EQ(clean_device_map(J(R"({"a": 0, "b": 0, "c": 0})")), J(R"({"": 0})"));
  // Regroups children of level 1 on the same device.
  EXPECT_EQ(clean_device_map(J(R"({"a.x": 0, "a.y": 0, "b.x": 1, "b.y": 1, "c": 1})")),
            J(R"({"a": 0, "b": 1, "c": 1})"));
  // Regroups children of level 2 on the same device.
  EXPECT_EQ(clean_device_map(J(R"({"a.x": 0, "a.y": 0, "b.x.0": 1, "b.x.1": 1, "b.y.0": 2, "b.y.1": 2, "c": 2})")),
            J(R"({"a": 0, "b.x": 1, "b.y": 2, "c": 2})"));
}

TEST(CleanDeviceMap, CollapsesOnlyWhenAllChildrenAgree) {
  EXPECT_EQ(clean_device_map(J(R"({"a.x": 0, "a.y": 1, "b": 1})")), J(R"({"a.x": 0, "a.y": 1, "b": 1})"));
  // A single entry below a prefix is not a group: nothing to merge.
  EXPECT_EQ(clean_device_map(J(R"({"a.x": 0, "b": 1})")), J(R"({"a.x": 0, "b": 1})"));
  EXPECT_EQ(clean_device_map(J(R"({"a": 0})")), J(R"({"a": 0})"));
  EXPECT_TRUE(clean_device_map(DeviceMap{}).empty());
  // "a.1" and "a.10" are siblings under "a", never parent and child.
  EXPECT_EQ(clean_device_map(J(R"({"a.1": 0, "a.10": 0, "b": 1})")), J(R"({"a": 0, "b": 1})"));
  EXPECT_EQ(clean_device_map(J(R"({"a.1.x": 0, "a.1.y": 0, "a.10": 1, "b": 1})")),
            J(R"({"a.1": 0, "a.10": 1, "b": 1})"));
  EXPECT_EQ(clean_device_map(J(R"({"m.l.0": "cpu", "m.l.1": "cpu", "m.n": "disk", "h": "disk"})")),
            J(R"({"m.l": "cpu", "m.n": "disk", "h": "disk"})"));
}

TEST(CleanDeviceMap, MergedKeyTakesThePlaceOfItsFirstEntry) {
  DeviceMap cleaned = clean_device_map(J(R"({"e": 0, "l.0": 0, "l.1": 0, "l.2.a": 1, "l.2.b": 1, "h": 1})"));
  ASSERT_EQ(cleaned.size(), 5u);
  EXPECT_EQ(cleaned.entries()[0].first, "e");
  EXPECT_EQ(cleaned.entries()[1].first, "l.0");
  EXPECT_EQ(cleaned.entries()[2].first, "l.1");
  EXPECT_EQ(cleaned.entries()[3], (DeviceMap::Entry{"l.2", Device::cuda(1)}));
  EXPECT_EQ(cleaned.entries()[4].first, "h");
}

TEST(CleanDeviceMap, AParentKeyIsOverwrittenByItsAgreeingChildren) {
  // Accelerate assigns the merged value to the parent's name, replacing what was there.
  EXPECT_EQ(clean_device_map(J(R"({"a": 1, "a.x": 0, "a.y": 0, "b": 1})")), J(R"({"a": 0, "b": 1})"));
}

}  // namespace
}  // namespace ferry
