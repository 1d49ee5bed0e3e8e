// load_checkpoint_in_model(broadcast_from_rank0), run under mpirun (tests/CMakeLists.txt): only rank 0 opens the
// checkpoint — the other ranks are given a path that does not exist — and every rank ends with exactly the tensors
// its device map gives it, bit for bit.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstring>
#include <filesystem>
#include <string>

#include "ferry/big_modeling/load_checkpoint.h"
#include "ferry/big_modeling/pipeline.h"
#include "ferry/core/process_group.h"
#include "ferry/io/offload.h"
#include "ferry/models/auto_model.h"
#include "ferry/nn/empty_weights.h"
#include "support/hf_folder.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

// Rank 0 writes a tiny llama (4 layers) in shards of at most 20 kB and sends every rank its config.
struct Checkpoint {
  fs::path folder;     // rank 0's; "/nonexistent/..." elsewhere
  std::string config;  // config.json's text, on every rank
};

Checkpoint make_checkpoint(ProcessGroup& w) {
  nlohmann::json c = test::tiny_llama_config();
  c["num_hidden_layers"] = 4;
  Checkpoint out;
  std::string folder;
  if (w.rank() == 0) {
    folder = (fs::temp_directory_path() / ("ferry-mpi-bcast-" + std::to_string(::getpid()))).string();
    fs::remove_all(folder);
    fs::create_directories(folder);
    test::write_random_hf_folder(folder, c, DType::F32, 20000);
  }
  out.folder = w.rank() == 0 ? fs::path(folder) : fs::path("/nonexistent/ferry-checkpoint");
  out.config = c.dump();
  return out;
}

std::shared_ptr<models::CausalLM> skeleton(const std::string& config) {
  auto guard = nn::init_empty_weights();
  return models::AutoModelForCausalLM::from_config(models::ConfigJson::parse(config));
}

using Named = std::vector<std::pair<std::string, Tensor>>;

// What a rank holds: its tensors that are not meta, and those it wrote to its offload folder, read back.
Named held(const nn::Module& model, const LoadCheckpointResult& r, const fs::path& folder) {
  Named out;
  for (const auto& [name, t] : model.state_dict())
    if (!t.is_meta()) out.emplace_back(name, t);
  for (const auto& [name, entry] : r.offload_index)
    out.emplace_back(name, io::load_offloaded_weight(folder / (name + ".dat"), entry));
  return out;
}

// Rank 0's tensors read directly, against what every other rank holds (`mine`, sent to rank 0).
void expect_same_as_direct(ProcessGroup& w, const Named& mine, const Checkpoint& ck) {
  const int kTag = 31;
  if (w.rank() != 0) {
    w.send_string(std::to_string(mine.size()), 0, kTag);
    for (const auto& [name, t] : mine) {
      w.send_string(name, 0, kTag);
      w.send_tensor(t, 0, kTag);
    }
    return;
  }
  auto direct = skeleton(ck.config);
  load_checkpoint_in_model(*direct, ck.folder);
  const auto want = direct->state_dict();
  auto find = [&](const std::string& name) -> const Tensor& {
    for (const auto& [n, t] : want)
      if (n == name) return t;
    throw Error("no tensor " + name);
  };
  for (int r = 1; r < w.size(); ++r) {
    const std::size_t n = std::stoul(w.recv_string(r, kTag));
    EXPECT_GT(n, 0u) << "rank " << r;
    for (std::size_t i = 0; i < n; ++i) {
      const std::string name = w.recv_string(r, kTag);
      const Tensor got = w.recv_tensor(r, kTag);
      const Tensor& t = find(name);
      ASSERT_EQ(got.shape(), t.shape()) << name;
      EXPECT_EQ(std::memcmp(got.raw_data(), t.raw_data(), t.nbytes()), 0) << "rank " << r << ": " << name;
    }
  }
}

TEST(BroadcastFromRank0, EveryRankGetsTheWholeModelWithoutTheFiles) {
  auto w = world_process_group();
  const Checkpoint ck = make_checkpoint(*w);
  auto model = skeleton(ck.config);
  LoadCheckpointOptions o;
  o.device_map = DeviceMap{{"", Device::cpu()}};
  o.broadcast_from_rank0 = true;
  const LoadCheckpointResult r = load_checkpoint_in_model(*model, ck.folder, o);
  EXPECT_TRUE(r.missing_keys.empty());
  for (const auto& [name, t] : model->state_dict()) EXPECT_FALSE(t.is_meta()) << name;
  expect_same_as_direct(*w, held(*model, r, {}), ck);
  w->barrier();
}

// load_checkpoint_and_dispatch(broadcast_from_rank0) with a map that puts a block on disk: every rank runs the whole
// model to rank 0's logits, bit for bit, the other ranks never opening the checkpoint.
TEST(BroadcastFromRank0, LoadCheckpointAndDispatchGivesEveryRankTheModel) {
  auto w = world_process_group();
  const Checkpoint ck = make_checkpoint(*w);
  auto model = skeleton(ck.config);
  DeviceMap map{{"model.embed_tokens", Device::cpu()}, {"model.rotary_emb", Device::cpu()}};
  for (int i = 0; i < 4; ++i) map.set("model.layers." + std::to_string(i), i == 2 ? Device::disk() : Device::cpu());
  map.set("model.norm", Device::cpu());
  map.set("lm_head", Device::cpu());
  LoadAndDispatchOptions o;
  o.device_map = map;
  o.offload_folder = fs::temp_directory_path() /
                     ("ferry-mpi-dispatch-off-" + std::to_string(::getpid()) + "-" + std::to_string(w->rank()));
  o.broadcast_from_rank0 = true;
  const LoadAndDispatchResult r = load_checkpoint_and_dispatch(*model, ck.folder, o);
  EXPECT_TRUE(r.load.missing_keys.empty());
  EXPECT_EQ(r.device_map, map);
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{5, 17, 3, 42, 8}, {5}, DType::I64);
  const Tensor logits = model->logits(ids);
  if (w->rank() == 0) {
    for (int rank = 1; rank < w->size(); ++rank) {
      const Tensor got = w->recv_tensor(rank, 32);
      ASSERT_EQ(got.shape(), logits.shape());
      EXPECT_EQ(std::memcmp(got.raw_data(), logits.raw_data(), logits.nbytes()), 0) << "rank " << rank;
    }
  } else {
    w->send_tensor(logits, 0, 32);
  }
  w->barrier();
  fs::remove_all(*o.offload_folder);
}

TEST(BroadcastFromRank0, EachRankGetsOnlyItsBlocksDiskOnesInItsOffloadFolder) {
  auto w = world_process_group();
  const Checkpoint ck = make_checkpoint(*w);
  auto model = skeleton(ck.config);
  // Blocks 0-1 on rank 0, the others spread over the other ranks, rank 1's on disk.
  DeviceMap map{{"model.embed_tokens", Device::cpu()}, {"model.rotary_emb", Device::cpu()}};
  for (int i = 0; i < 4; ++i) {
    const int rank = i < 2 ? 0 : 1 + (i - 2) % (w->size() - 1);
    map.set("model.layers." + std::to_string(i), (rank == 1 ? Device::disk() : Device::cpu()).on_rank(rank));
  }
  map.set("model.norm", Device::cpu());
  map.set("lm_head", Device::cpu());
  const RankShare share = rank_share(*model, map, w->rank(), w->size());
  const fs::path off = fs::temp_directory_path() / ("ferry-mpi-bcast-off-" + std::to_string(::getpid()));
  LoadCheckpointOptions o;
  o.device_map = share.local;
  o.skip_modules = share.remote;
  o.offload_folder = off;
  o.broadcast_from_rank0 = true;
  const LoadCheckpointResult r = load_checkpoint_in_model(*model, ck.folder, o);
  EXPECT_TRUE(r.missing_keys.empty());
  for (const auto& [name, t] : model->state_dict()) {
    const bool remote = std::any_of(share.remote.begin(), share.remote.end(),
                                    [&](const std::string& m) { return module_covers(m, name); });
    const bool on_disk = share.local.device_for(name)->is_disk() && !remote;
    EXPECT_EQ(t.is_meta(), remote || on_disk) << "rank " << w->rank() << ": " << name;
    if (on_disk) {
      EXPECT_TRUE(r.offload_index.count(name)) << name;  // written to this rank's folder
    }
  }
  if (w->rank() == 1) {
    EXPECT_FALSE(r.offload_index.empty());
  }
  expect_same_as_direct(*w, held(*model, r, off), ck);
  w->barrier();
  fs::remove_all(off);
  if (w->rank() == 0) fs::remove_all(ck.folder);
}

}  // namespace
}  // namespace ferry
