// A pipeline's device map planned from budgets on several ranks (infer_device_map_over_ranks), what each rank loads
// of it (rank_share), and the maps a pipeline refuses — all in one process; the runs over ranks are tests/mpi.
#include <gtest/gtest.h>

#include "ferry/big_modeling/max_memory.h"
#include "ferry/big_modeling/module_sizes.h"
#include "ferry/big_modeling/pipeline.h"
#include "ferry/core/error.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/causal_lm.h"
#include "ferry/nn/empty_weights.h"
#include "support/hf_folder.h"

namespace ferry {
namespace {

std::shared_ptr<models::CausalLM> skeleton(int layers) {
  nlohmann::json c = test::tiny_llama_config();
  c["num_hidden_layers"] = layers;
  auto guard = nn::init_empty_weights();
  return models::AutoModelForCausalLM::from_config(models::ConfigJson::from_json(c));
}

struct Sizes {
  int64_t outside = 0, block = 0;
};
Sizes sizes_of(const models::CausalLM& m) {
  const ModuleSizes s = compute_module_sizes(m);
  return {s.total() - s["model.layers"], s["model.layers.0"]};
}

std::vector<std::string> keys(const DeviceMap& map) {
  std::vector<std::string> out;
  for (const auto& [k, d] : map) out.push_back(k);
  return out;
}

TEST(PipelinePlan, SequentialFillsTheRanksInOrder) {
  auto m = skeleton(4);
  const Sizes s = sizes_of(*m);
  const MaxMemory budget{{Device::cpu(), s.outside + 2 * s.block}, {Device::cpu().on_rank(1), 2 * s.block}};
  const DeviceMap map = infer_device_map_over_ranks(*m, "model.layers", budget, false, std::nullopt);
  EXPECT_EQ(keys(map),
            (std::vector<std::string>{"model.embed_tokens", "model.layers.0", "model.layers.1", "model.layers.2",
                                      "model.layers.3", "model.norm", "model.rotary_emb", "lm_head"}));
  EXPECT_EQ(*map.at("model.layers.1"), Device::cpu());
  EXPECT_EQ(*map.at("model.layers.2"), Device::cpu().on_rank(1));
  EXPECT_EQ(*map.at("model.layers.3"), Device::cpu().on_rank(1));
  EXPECT_EQ(*map.at("lm_head"), Device::cpu());  // everything outside the blocks stays with rank 0
  EXPECT_EQ(*map.at("model.norm"), Device::cpu());
}

TEST(PipelinePlan, BalancedSharesInProportionToMemory) {
  auto m = skeleton(6);
  const Sizes s = sizes_of(*m);
  // Both ranks could hold every block; balanced gives each about half (rank 0's memory after its other modules).
  const int64_t each = s.outside + 6 * s.block;
  const MaxMemory budget{{Device::cpu(), each}, {Device::cpu().on_rank(1), each - s.outside}};
  const DeviceMap seq = infer_device_map_over_ranks(*m, "model.layers", budget, false, std::nullopt);
  const DeviceMap bal = infer_device_map_over_ranks(*m, "model.layers", budget, true, std::nullopt);
  int seq1 = 0, bal1 = 0;
  for (const auto& [k, d] : seq) seq1 += d.rank == 1;
  for (const auto& [k, d] : bal) bal1 += d.rank == 1;
  EXPECT_EQ(seq1, 0);  // sequential: rank 0 holds all it can
  EXPECT_EQ(bal1, 3);
}

TEST(PipelinePlan, WhatDoesNotFitGoesToTheDiskOfTheRankThatListsOne) {
  auto m = skeleton(4);
  const Sizes s = sizes_of(*m);
  const MaxMemory budget = MaxMemory::from_flag("rank0:cpu=" + std::to_string(s.outside + s.block) +
                                                ",rank1:cpu=" + std::to_string(s.block) + ",rank1:disk");
  const DeviceMap map = infer_device_map_over_ranks(*m, "model.layers", budget, false, std::nullopt);
  EXPECT_EQ(*map.at("model.layers.0"), Device::cpu());
  EXPECT_EQ(*map.at("model.layers.1"), Device::cpu().on_rank(1));
  EXPECT_EQ(*map.at("model.layers.2"), Device::disk().on_rank(1));
  EXPECT_EQ(*map.at("model.layers.3"), Device::disk().on_rank(1));
}

TEST(PipelinePlan, ImpossibleBudgetsAreErrors) {
  auto m = skeleton(4);
  const Sizes s = sizes_of(*m);
  auto plan = [&](const MaxMemory& b) { return infer_device_map_over_ranks(*m, "model.layers", b, false, {}); };
  EXPECT_THROW(plan(MaxMemory{{Device::cpu(), s.outside + s.block}, {Device::cpu().on_rank(1), s.block}}),
               Error);                                                        // no disk
  EXPECT_THROW(plan(MaxMemory{{Device::cpu().on_rank(1), 1 << 30}}), Error);  // nothing on rank 0
  EXPECT_THROW(plan(MaxMemory{{Device::cpu(), s.outside / 2}, {Device::cpu().on_rank(1), 1 << 30}}), Error);
  EXPECT_THROW(plan(MaxMemory::from_flag("cpu=1GiB,disk,rank1:disk")), Error);  // two disks
}

TEST(PipelinePlan, BudgetFlagsNameRanksAndADiskWithoutASize) {
  const MaxMemory m = MaxMemory::from_flag("rank0:cpu=8GiB,rank1:cpu=4GiB,rank1:disk");
  EXPECT_EQ(m.get(Device::cpu()), int64_t{8} << 30);
  EXPECT_EQ(m.get(Device::cpu().on_rank(1)), int64_t{4} << 30);
  EXPECT_TRUE(m.contains(Device::disk().on_rank(1)));
  EXPECT_THROW(MaxMemory::from_flag("rank1:cpu"), Error);  // memory needs a size
}

TEST(PipelinePlan, EachRankLoadsItsOwnBlocksAndWhatRunsEverywhere) {
  auto m = skeleton(4);
  const DeviceMap map = DeviceMap::from_json(R"({"model.embed_tokens": "cpu", "model.layers.0": "cpu",
      "model.layers.1": "rank1:cpu", "model.layers.2": "rank1:disk", "model.layers.3": "rank2:cpu",
      "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu"})");
  EXPECT_TRUE(has_ranks(map));
  EXPECT_EQ(ranks_named(map), 3);
  EXPECT_EQ(DeviceMap::from_json(map.to_json()), map);  // the JSON form keeps the ranks
  const RankShare one = rank_share(*m, map, 1, 3);
  EXPECT_EQ(one.remote, (std::vector<std::string>{"model.embed_tokens", "model.layers.0", "model.layers.3",
                                                  "model.norm", "lm_head"}));
  EXPECT_EQ(*one.local.at("model.layers.1"), Device::cpu());
  EXPECT_EQ(*one.local.at("model.layers.2"), Device::disk());
  EXPECT_EQ(*one.local.at("model.rotary_emb"), Device::cpu());  // no parameters: runs on every rank
  EXPECT_THROW(rank_share(*m, map, 0, 2), Error);               // rank 2 in a job of 2
  const std::vector<std::string> blocks = {"model.layers.0", "model.layers.1", "model.layers.2", "model.layers.3"};
  EXPECT_NO_THROW(check_pipeline_map(*m, map, blocks));
  DeviceMap head_away = map;
  head_away.set("lm_head", Device::cpu().on_rank(2));
  EXPECT_THROW(check_pipeline_map(*m, head_away, blocks), Error);
}

}  // namespace
}  // namespace ferry
