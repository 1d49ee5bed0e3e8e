// DeviceMap container, whole-component prefix lookup and Accelerate's JSON form.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ferry/big_modeling/device_map.h"
#include "ferry/core/error.h"

namespace ferry {
namespace {

TEST(DeviceMap, KeepsInsertionOrderAndOverwritesInPlace) {
  DeviceMap map;
  map.set("b", Device::cuda(0));
  map.set("a", Device::cpu());
  map.set("b", Device::disk());
  ASSERT_EQ(map.size(), 2u);
  EXPECT_EQ(map.entries()[0], (DeviceMap::Entry{"b", Device::disk()}));
  EXPECT_EQ(map.entries()[1], (DeviceMap::Entry{"a", Device::cpu()}));
  EXPECT_TRUE(map.erase("b"));
  EXPECT_FALSE(map.erase("b"));
  EXPECT_EQ(map.at("a"), Device::cpu());
  EXPECT_EQ(map.at("b"), std::nullopt);
  map.set("c", Device::cuda(1));
  EXPECT_EQ(map.at("c"), Device::cuda(1));  // the index survives an erase before it
  EXPECT_THROW(map.set("x", Device::meta()), Error);
  EXPECT_EQ(map.devices(), (std::vector<Device>{Device::cpu(), Device::cuda(1)}));
}

TEST(DeviceMap, EqualityIgnoresOrderLikePythonDicts) {
  DeviceMap a{{"x", Device::cuda(0)}, {"y", Device::cpu()}};
  DeviceMap b{{"y", Device::cpu()}, {"x", Device::cuda(0)}};
  EXPECT_EQ(a, b);
  b.set("x", Device::cuda(1));
  EXPECT_NE(a, b);
  EXPECT_NE(a, (DeviceMap{{"x", Device::cuda(0)}}));
}

TEST(DeviceMap, PrefixMatchingIsByWholeComponents) {
  DeviceMap map{{"a.1", Device::cuda(0)}, {"a.10", Device::cpu()}, {"b", Device::disk()}};
  EXPECT_EQ(map.device_for("a.1.weight"), Device::cuda(0));
  EXPECT_EQ(map.device_for("a.10.weight"), Device::cpu());
  EXPECT_EQ(map.device_for("a.1"), Device::cuda(0));
  EXPECT_EQ(map.device_for("a.100.weight"), std::nullopt);
  EXPECT_EQ(map.device_for("a.11"), std::nullopt);
  EXPECT_EQ(map.device_for("bb.weight"), std::nullopt);
  EXPECT_EQ(map.key_for("b.x.y.z"), "b");
  EXPECT_EQ(map.device_for("a"), std::nullopt);

  DeviceMap root{{"", Device::cpu()}, {"lm_head", Device::disk()}};
  EXPECT_EQ(root.device_for("model.layers.0.weight"), Device::cpu());
  EXPECT_EQ(root.device_for("lm_head.weight"), Device::disk());
  EXPECT_EQ(root.key_for("x"), "");
}

TEST(DeviceMapJson, ReadsAccelerateForm) {
  DeviceMap map = DeviceMap::from_json(
      R"({"model.layers.0": 0, "model.layers.1": 1, "lm_head": "cpu", "x": "disk", "y": "cuda:2", "z": "virt:1"})");
  EXPECT_EQ(map, (DeviceMap{{"model.layers.0", Device::cuda(0)},
                            {"model.layers.1", Device::cuda(1)},
                            {"lm_head", Device::cpu()},
                            {"x", Device::disk()},
                            {"y", Device::cuda(2)},
                            {"z", Device::virt(1)}}));
  EXPECT_EQ(map.entries()[2].first, "lm_head");  // file order is kept
  EXPECT_EQ(DeviceMap::from_json(R"({"": 0})"), (DeviceMap{{"", Device::cuda(0)}}));
  EXPECT_TRUE(DeviceMap::from_json("{}").empty());
}

TEST(DeviceMapJson, WritesAccelerateFormAndRoundTrips) {
  DeviceMap map{{"model.layers.0", Device::cuda(0)}, {"lm_head", Device::cpu()}, {"x", Device::disk()},
                {"v", Device::virt(3)}};
  EXPECT_EQ(map.to_json(), R"({"model.layers.0":0,"lm_head":"cpu","x":"disk","v":"virt:3"})");
  DeviceMap back = DeviceMap::from_json(map.to_json(2));
  EXPECT_EQ(back.entries(), map.entries());
}

TEST(DeviceMapJson, MalformedMapsNameTheBadKey) {
  struct Case {
    const char* json;
    const char* mentions;
  };
  for (const Case& c : {Case{R"({"lm_head": true})", "lm_head"}, Case{R"({"lm_head": -1})", "lm_head"},
                        Case{R"({"a": "gpu"})", "\"a\""}, Case{R"({"a": "meta"})", "meta"},
                        Case{R"({"a": 1.5})", "\"a\""}, Case{R"({"a": null})", "\"a\""},
                        Case{R"({"a": [0]})", "\"a\""}, Case{R"({"a": 0, "a": 1})", "twice"},
                        Case{R"([["a", 0]])", "object"}, Case{R"({"a": 0)", "JSON"}, Case{"", "JSON"},
                        Case{R"({"a": 99999999999})", "out of range"}}) {
    try {
      DeviceMap::from_json(c.json);
      ADD_FAILURE() << "accepted " << c.json;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.mentions), std::string::npos) << c.json << " -> " << e.what();
    }
  }
}

TEST(DeviceMapJson, FilesRoundTripAndBadFilesNameThePath) {
  auto dir = std::filesystem::temp_directory_path() / ("ferry_device_map_json_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "device_map.json").string();
  DeviceMap map{{"a", Device::cuda(0)}, {"b", Device::disk()}};
  map.write_json_file(path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(DeviceMap::read_json_file(path).entries(), map.entries());
  {
    std::ofstream(path) << R"({"a": "nope"})";
  }
  try {
    DeviceMap::read_json_file(path);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_THROW(DeviceMap::read_json_file((dir / "missing.json").string()), Error);
  EXPECT_THROW(map.write_json_file((dir / "no" / "such" / "dir.json").string()), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ferry
