#include "ferry/core/device.h"

#include <gtest/gtest.h>

#include "ferry/core/error.h"

namespace ferry {
namespace {

TEST(Device, ParsesEverySpelling) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("meta"), Device::meta());
  EXPECT_EQ(Device::parse("disk"), Device::disk());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::parse("2"), Device::cuda(2));  // a bare integer is a GPU, as in Accelerate's device maps
  EXPECT_EQ(Device::parse("virt:1"), Device::virt(1));
}

TEST(Device, PrintsAndRoundTrips) {
  for (Device d : {Device::cpu(), Device::meta(), Device::disk(), Device::cuda(0), Device::cuda(7), Device::virt(2)})
    EXPECT_EQ(Device::parse(d.str()), d) << d.str();
  EXPECT_EQ(Device::cuda(1).str(), "cuda:1");
}

TEST(Device, BadStringsAreErrors) {
  for (const char* bad : {"", "gpu", "cuda:", "cuda:-1", "cuda:x", "-1", "1.5", "cpu ", "CPU", "virt:", "cuda:1:2",
                          "99999999999"}) {
    EXPECT_THROW(Device::parse(bad), Error) << "'" << bad << "'";
  }
  try {
    Device::parse("gpu0");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("invalid device 'gpu0'"), std::string::npos);
    EXPECT_NE(e.hint().find("cuda:N"), std::string::npos);
  }
}

TEST(Device, RanksPrefixAnyDevice) {
  EXPECT_EQ(Device::parse("rank1:cpu"), Device::cpu().on_rank(1));
  EXPECT_EQ(Device::parse("rank2:cuda:1"), Device::cuda(1).on_rank(2));
  EXPECT_EQ(Device::parse("rank3:disk"), Device::disk().on_rank(3));
  EXPECT_EQ(Device::parse("rank1:0"), Device::cuda(0).on_rank(1));
  EXPECT_EQ(Device::parse("rank0:cpu"), Device::cpu());  // rank 0 is a plain device
  EXPECT_EQ(Device::cuda(1).on_rank(2).str(), "rank2:cuda:1");
  EXPECT_EQ(Device::cpu().on_rank(0).str(), "cpu");
  EXPECT_EQ(Device::cpu().on_rank(1).local(), Device::cpu());
  EXPECT_NE(Device::cpu().on_rank(1), Device::cpu());
  EXPECT_NE(std::hash<Device>{}(Device::cpu().on_rank(1)), std::hash<Device>{}(Device::cpu()));
  for (const char* bad :
       {"rank", "rank1", "rank:cpu", "rankx:cpu", "rank1:", "rank1:gpu", "rank1:rank2:cpu", "rank-1:cpu"})
    EXPECT_THROW(Device::parse(bad), Error) << "'" << bad << "'";
}

TEST(Device, Classification) {
  EXPECT_TRUE(Device::virt(0).is_accelerator());
  EXPECT_TRUE(Device::cuda(0).is_accelerator());
  EXPECT_FALSE(Device::cpu().is_accelerator());
  EXPECT_TRUE(Device::virt(0).is_host_addressable());
  EXPECT_FALSE(Device::meta().is_host_addressable());
  EXPECT_LT(Device::cpu(), Device::cuda(0));
}

}  // namespace
}  // namespace ferry
