// Budgets: Accelerate's size strings (test_convert_file_size), MaxMemory ordering and key parsing, get_max_memory.
#include "ferry/big_modeling/max_memory.h"

#include <gtest/gtest.h>

#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"

namespace ferry {
namespace {

TEST(ConvertFileSizeToInt, AccelerateCases) {
  EXPECT_EQ(convert_file_size_to_int("0MB"), 0);
  EXPECT_EQ(convert_file_size_to_int("100MB"), 100 * 1000000LL);
  EXPECT_EQ(convert_file_size_to_int("2GiB"), 2LL << 30);
  EXPECT_EQ(convert_file_size_to_int("512KiB"), 512LL << 10);
  EXPECT_EQ(convert_file_size_to_int("1.5GB"), 1500000000LL);
  EXPECT_EQ(convert_file_size_to_int("100KB"), 100000);
  EXPECT_EQ(convert_file_size_to_int("500"), 500);
}

TEST(ConvertFileSizeToInt, UnitsAndFractions) {
  EXPECT_EQ(convert_file_size_to_int("10GiB"), 10LL << 30);
  EXPECT_EQ(convert_file_size_to_int("10GB"), 10000000000LL);
  EXPECT_EQ(convert_file_size_to_int("1.5GiB"), 1610612736LL);
  EXPECT_EQ(convert_file_size_to_int("3MiB"), 3LL << 20);
  EXPECT_EQ(convert_file_size_to_int("10gib"), 10LL << 30);  // units are case-insensitive
  EXPECT_EQ(convert_file_size_to_int("1e3MB"), 1000000000LL);
  EXPECT_EQ(convert_file_size_to_int("0.5KB"), 500);
  EXPECT_EQ(convert_file_size_to_int("1.0000001KB"), 1000);  // truncates like Python's int()
  // Accelerate's rule: a lower-case final "b" on a decimal unit means bits.
  EXPECT_EQ(convert_file_size_to_int("8Gb"), 1000000000LL);
  EXPECT_EQ(convert_file_size_to_int("8mb"), 1000000);
}

TEST(ConvertFileSizeToInt, MalformedSizesAreErrorsThatEchoTheValue) {
  for (const char* bad : {"5MBB", "-1GB", "5k0MB", "", "GB", "GiB", "1.2.3GB", "ten GB", "1e400GB", "nanGB", "infGB",
                          "-1", "1 0MB", "0x10MB", "12XB", "9999999999999GB"}) {
    try {
      convert_file_size_to_int(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(e.problem().find(std::string("'") + bad + "'"), std::string::npos) << e.what();
      EXPECT_NE(e.hint().find("5.0GB"), std::string::npos) << e.what();
    }
  }
}

TEST(MaxMemory, KeysParseLikeAccelerateAndOrderGpusThenCpuThenDisk) {
  MaxMemory m = MaxMemory::parse({{"disk", "1000GB"}, {"cpu", "30GB"}, {"1", "2GiB"}, {"cuda:0", "1GiB"}});
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m.entries()[0], (MaxMemory::Entry{Device::cuda(0), 1LL << 30}));
  EXPECT_EQ(m.entries()[1], (MaxMemory::Entry{Device::cuda(1), 2LL << 30}));
  EXPECT_EQ(m.entries()[2], (MaxMemory::Entry{Device::cpu(), 30000000000LL}));
  EXPECT_EQ(m.entries()[3], (MaxMemory::Entry{Device::disk(), 1000000000000LL}));
  EXPECT_EQ(m.accelerators(), (std::vector<Device>{Device::cuda(0), Device::cuda(1)}));

  MaxMemory v = MaxMemory::parse({{"cpu", "100"}, {"virt:1", "7"}, {"virt:0", "5"}});
  EXPECT_EQ(v.accelerators(), (std::vector<Device>{Device::virt(0), Device::virt(1)}));
  EXPECT_EQ(v.get(Device::virt(1)), 7);
  EXPECT_FALSE(v.contains(Device::disk()));
}

TEST(MaxMemory, SetOverwritesAndKeepsOrder) {
  MaxMemory m{{Device::cpu(), 10}, {Device::cuda(2), 3}, {Device::cuda(0), 1}};
  m.set(Device::cuda(1), 2);
  m.set(Device::cpu(), 11);
  std::vector<Device> order;
  for (const auto& e : m.entries()) order.push_back(e.device);
  EXPECT_EQ(order, (std::vector<Device>{Device::cuda(0), Device::cuda(1), Device::cuda(2), Device::cpu()}));
  EXPECT_EQ(m.get(Device::cpu()), 11);
  EXPECT_TRUE(m.erase(Device::cuda(1)));
  EXPECT_FALSE(m.erase(Device::cuda(1)));
  EXPECT_THROW(m.set(Device::meta(), 1), Error);
  EXPECT_THROW(m.set(Device::cpu(), -1), Error);
}

TEST(MaxMemory, UnknownDevicesAndBadValuesAreErrors) {
  for (const char* key : {"mps", "gpu0", "meta", "-1", "", "CPU"}) {
    try {
      MaxMemory::parse({{key, "1GB"}});
      ADD_FAILURE() << "accepted key '" << key << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + std::string(key) + "'"), std::string::npos) << e.what();
      EXPECT_NE(e.hint().find("cpu"), std::string::npos) << e.what();
    }
  }
  try {
    MaxMemory::parse({{"0", "5MBB"}});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_memory[0]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'5MBB'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MaxMemory::parse({{"0", "1GB"}, {"cuda:0", "2GB"}}), Error);  // the same GPU twice
}

TEST(MaxMemory, JsonAndFlagForms) {
  MaxMemory m = MaxMemory::from_json(R"({"cpu": 1000, "0": "1KB", "1": 300})");
  EXPECT_EQ(m, (MaxMemory{{Device::cuda(0), 1000}, {Device::cuda(1), 300}, {Device::cpu(), 1000}}));
  EXPECT_EQ(m.to_json(), R"({"0":1000,"1":300,"cpu":1000})");
  EXPECT_EQ(MaxMemory::from_json(m.to_json()), m);
  EXPECT_EQ(MaxMemory::from_flag("0=1KB,1=300,cpu=1000"), m);
  EXPECT_EQ(MaxMemory::from_flag(""), MaxMemory{});

  for (const char* bad : {"[1,2]", "{\"0\": -5}", "{\"0\": 1.5}", "{\"0\": true}", "{\"0\": null}", "{", "3",
                          "{\"gpu\": 1}"})
    EXPECT_THROW(MaxMemory::from_json(bad), Error) << bad;
  for (const char* bad : {"0", "=5", "0=5MBB", "0=1GB,,cpu=1GB", "mps=1GB"})
    EXPECT_THROW(MaxMemory::from_flag(bad), Error) << bad;
}

TEST(MaxMemory, DescribeIsReadable) {
  MaxMemory m{{Device::cuda(0), 1LL << 30}, {Device::cpu(), 200}};
  EXPECT_EQ(m.describe(), "cuda:0=1.00 GiB, cpu=200 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
}

TEST(GetMaxMemory, MeasuresHostAndVirtualDevices) {
  VirtualDeviceOptions options;
  options.count = 2;
  options.capacity_bytes = 123456;
  enable_virtual_devices(options);
  MaxMemory m = get_max_memory();
  disable_virtual_devices();
  // Only when this machine has no CUDA GPU do the virtual devices stand in for accelerators.
  if (find_backend(Device::Kind::CUDA) == nullptr) {
    ASSERT_EQ(m.accelerators(), (std::vector<Device>{Device::virt(0), Device::virt(1)}));
    EXPECT_GT(*m.get(Device::virt(0)), 0);
    EXPECT_LE(*m.get(Device::virt(0)), 123456);
  }
  ASSERT_TRUE(m.contains(Device::cpu()));
  EXPECT_GT(*m.get(Device::cpu()), 0);
  EXPECT_EQ(m.entries().back().device, Device::cpu());
  EXPECT_FALSE(m.contains(Device::disk()));
  EXPECT_GT(available_host_memory(), 0);
}

TEST(GetMaxMemory, UserBudgetIsKeptAndMissingGpusWarn) {
  MaxMemory user{{Device::cuda(7), 100}, {Device::cpu(), 5}};
  ScopedLogCapture logs;
  MaxMemory m = get_max_memory(user);
  EXPECT_EQ(m, user);
  EXPECT_TRUE(logs.contains("Device cuda:7 is not available"));
}

}  // namespace
}  // namespace ferry
