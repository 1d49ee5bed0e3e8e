// plan_with_offload_io and staging_bytes_for: a plan whose disk part is read direct reserves the staging pool from
// the cpu budget (so RAM use stays within max_memory), and the pool is sized from the largest hook loads.
#include "ferry/big_modeling/offload_plan.h"

#include <gtest/gtest.h>

#include "ferry/big_modeling/dispatch.h"
#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/nn/empty_weights.h"
#include "toy_llama.h"

namespace ferry {
namespace {

std::shared_ptr<test::ToyLlama> toy() {
  auto guard = nn::init_empty_weights();
  return std::make_shared<test::ToyLlama>(/*vocab=*/4096, /*d=*/512, /*n_layers=*/8);
}

int64_t total_bytes(const nn::Module& m) {
  int64_t n = 0;
  for (const auto& [name, t] : m.state_dict()) n += static_cast<int64_t>(t.nbytes());
  return n;
}

TEST(OffloadPlan, DirectReadsReserveTheStagingPoolFromTheCpuBudget) {
  auto model = toy();
  PlanOptions o;
  o.max_memory = MaxMemory{{Device::cpu(), total_bytes(*model) / 2}};
  o.no_split_module_classes = {"ToyDecoderLayer"};
  const OffloadPlan mmap = plan_with_offload_io(*model, DeviceMapMode::Auto, o, OffloadIo::Mmap, 2);
  EXPECT_EQ(mmap.choice.io, OffloadIo::Mmap);
  EXPECT_EQ(mmap.choice.staging_bytes, 0u);
  EXPECT_TRUE(mmap.options.reservations.empty());

  const OffloadPlan direct = plan_with_offload_io(*model, DeviceMapMode::Auto, o, OffloadIo::Direct, 2);
  EXPECT_EQ(direct.choice.io, OffloadIo::Direct);
  ASSERT_EQ(direct.options.reservations.size(), 1u);
  EXPECT_EQ(direct.options.reservations[0].device, Device::cpu());
  EXPECT_GT(direct.choice.staging_bytes, 0u);
  // Less room on cpu: at least as much on disk, and cpu weights + the pool within the budget.
  EXPECT_GE(disk_bytes_of(*model, direct.device_map), disk_bytes_of(*model, mmap.device_map));
  int64_t cpu = 0;
  for (const auto& [name, t] : model->state_dict())
    if (direct.device_map.device_for(name)->is_cpu()) cpu += static_cast<int64_t>(t.nbytes());
  EXPECT_LE(cpu + direct.options.reservations[0].bytes, total_bytes(*model) / 2);

  // Auto on this machine, whose RAM can cache a model this small: the page cache, nothing reserved.
  const OffloadPlan aut = plan_with_offload_io(*model, DeviceMapMode::Auto, o, OffloadIo::Auto, 2);
  EXPECT_EQ(aut.choice.io, OffloadIo::Mmap);
  EXPECT_TRUE(aut.options.reservations.empty());

  // Direct with a budget that cannot hold the pool is the planner's error, naming it.
  o.max_memory = MaxMemory{{Device::cpu(), 4096}};
  try {
    plan_with_offload_io(*model, DeviceMapMode::Auto, o, OffloadIo::Direct, 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("staging pool"), std::string::npos) << e.what();
  }
}

// Reserving the pool leaves less cpu, so more goes to disk and the pool the new map needs can be larger (here: a
// first disk part under the pool's 16 MiB floor, whose pool is that whole disk part). The plan reserves what the
// final map needs, the pool is that reservation, and the cpu weights with the pool stay within the budget.
TEST(OffloadPlan, TheReservedPoolHoldsWhatTheFinalMapNeeds) {
  std::shared_ptr<test::ToyLlama> model;
  {
    auto guard = nn::init_empty_weights();
    model = std::make_shared<test::ToyLlama>(/*vocab=*/512, /*d=*/256, /*n_layers=*/32);  // 2 MiB layers
  }
  PlanOptions o;
  o.no_split_module_classes = {"ToyDecoderLayer"};
  const int64_t mib = int64_t{1} << 20;
  for (int64_t off_cpu : {6 * mib, 10 * mib, 30 * mib, total_bytes(*model) / 2}) {
    const int64_t budget = total_bytes(*model) - off_cpu;
    o.max_memory = MaxMemory{{Device::cpu(), budget}};
    const OffloadPlan p = plan_with_offload_io(*model, DeviceMapMode::Auto, o, OffloadIo::Direct, 2);
    ASSERT_EQ(p.options.reservations.size(), 1u) << off_cpu;
    const std::size_t needed = staging_bytes_for(*model, p.device_map, 2);
    EXPECT_GT(needed, 0u) << off_cpu;
    EXPECT_GE(static_cast<std::size_t>(p.options.reservations[0].bytes), needed) << off_cpu << " bytes off the cpu";
    EXPECT_EQ(p.choice.staging_bytes, static_cast<std::size_t>(p.options.reservations[0].bytes)) << off_cpu;
    int64_t cpu = 0;
    for (const auto& [name, t] : model->state_dict())
      if (p.device_map.device_for(name)->is_cpu()) cpu += static_cast<int64_t>(t.nbytes());
    EXPECT_LE(cpu + p.options.reservations[0].bytes, budget) << off_cpu;
  }
}

TEST(OffloadPlan, ThePoolHoldsThePrefetchPlusTwoLargestLoadsAndNeverMoreThanTheDiskPart) {
  auto model = toy();
  const DeviceMap all{{"", Device::disk()}};
  const std::size_t disk = disk_bytes_of(*model, all);
  // Loads of 4 MiB (MLP) and 8 MiB (head), each padded by two blocks; the 8 MiB embedding is read by the row, never
  // loaded whole: prefetch 0 holds the head and an MLP (raised to the 16 MiB floor), a deeper prefetch more, never
  // more than the disk part.
  const std::size_t head = (std::size_t{8} << 20) + 2 * 4096, mlp = (std::size_t{4} << 20) + 2 * 4096;
  EXPECT_EQ(staging_bytes_for(*model, all, 0), std::max(head + mlp, std::size_t{16} << 20));
  EXPECT_EQ(staging_bytes_for(*model, all, 2), head + 3 * mlp);
  EXPECT_LE(staging_bytes_for(*model, all, 100), disk + (std::size_t{1} << 20));
  EXPECT_EQ(staging_bytes_for(*model, DeviceMap{{"", Device::cpu()}}, 2), 0u);
  // A big model: 4096 x 4096 f32 layers (64 MiB each, 8 of them): prefetch + 2 of them.
  std::shared_ptr<test::ToyLlama> big;
  {
    auto guard = nn::init_empty_weights();
    big = std::make_shared<test::ToyLlama>(/*vocab=*/64, /*d=*/4096, /*n_layers=*/2);
  }
  const std::size_t pool0 = staging_bytes_for(*big, all, 0), pool2 = staging_bytes_for(*big, all, 2);
  EXPECT_LT(pool0, pool2);
  EXPECT_LE(pool2, disk_bytes_of(*big, all) + (std::size_t{1} << 20));
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

// Weights copied ahead to the GPU (device_staging.h) take prefetch × the largest offloaded module there; the plan
// reserves it on the accelerator and so keeps that much fewer layers on it.
TEST(OffloadPlan, PrefetchingToAnAcceleratorReservesRoomForTheCopiesAhead) {
  enable_virtual_devices({.count = 1, .capacity_bytes = std::size_t(1) << 30});
  auto model = toy();
  const int64_t proj = static_cast<int64_t>(512 * 2048 * 4);  // up_proj or down_proj, f32
  PlanOptions o;
  o.max_memory = MaxMemory{{Device::virt(0), total_bytes(*model) / 2}, {Device::cpu(), total_bytes(*model) * 2}};
  o.no_split_module_classes = {"ToyDecoderLayer"};
  const OffloadPlan none = plan_with_offload_io(*model, DeviceMapMode::Auto, o, OffloadIo::Mmap, 0);
  EXPECT_TRUE(none.options.reservations.empty());
  EXPECT_EQ(gpu_prefetch_bytes_for(*model, none.device_map, 0), 0u);
  const std::size_t ahead = gpu_prefetch_bytes_for(*model, none.device_map, 2);
  // The two largest hook loads: the head (4096 × 512 f32) when it is offloaded, else two projections.
  EXPECT_GE(ahead, static_cast<std::size_t>(2 * proj));
  EXPECT_LE(ahead, static_cast<std::size_t>(2 * 4096 * 512 * 4));

  const OffloadPlan two = plan_with_offload_io(*model, DeviceMapMode::Auto, o, OffloadIo::Mmap, 2);
  ASSERT_EQ(two.options.reservations.size(), 1u);
  EXPECT_EQ(two.options.reservations[0].device, Device::virt(0));
  EXPECT_EQ(two.options.reservations[0].bytes, static_cast<int64_t>(ahead));
  auto on_gpu = [&](const DeviceMap& map) {
    int64_t n = 0;
    for (const auto& [name, t] : model->state_dict())
      if (map.device_for(name)->is_accelerator()) n += static_cast<int64_t>(t.nbytes());
    return n;
  };
  EXPECT_LT(on_gpu(two.device_map), on_gpu(none.device_map));
  EXPECT_LE(on_gpu(two.device_map) + static_cast<int64_t>(ahead), total_bytes(*model) / 2);
  // Nothing offloaded behind the accelerator: nothing to copy ahead.
  EXPECT_EQ(gpu_prefetch_bytes_for(*model, DeviceMap{{"", Device::virt(0)}}, 2), 0u);
  disable_virtual_devices();
}

TEST(OffloadIo, ParsingAndTheAutoPolicy) {
  EXPECT_EQ(parse_offload_io("auto"), OffloadIo::Auto);
  EXPECT_EQ(parse_offload_io("direct"), OffloadIo::Direct);
  EXPECT_EQ(parse_offload_io("mmap"), OffloadIo::Mmap);
  EXPECT_THROW(parse_offload_io("fast"), Error);
  EXPECT_STREQ(to_string(OffloadIo::Direct), "direct");
  EXPECT_EQ(choose_offload_io(OffloadIo::Auto, 10 << 20, 100 << 20), OffloadIo::Mmap);    // fits: page cache
  EXPECT_EQ(choose_offload_io(OffloadIo::Auto, 90 << 20, 100 << 20), OffloadIo::Direct);  // does not
  EXPECT_EQ(choose_offload_io(OffloadIo::Mmap, 90 << 20, 100 << 20), OffloadIo::Mmap);
  EXPECT_EQ(choose_offload_io(OffloadIo::Direct, 1, 100 << 20), OffloadIo::Direct);
  EXPECT_GT(cacheable_ram_bytes(), 0u);
}

}  // namespace
}  // namespace ferry
