// A model split over ranks (big_modeling/pipeline.h, models/pipeline.h), run by ctest under `mpirun -np 2` and
// `-np 3`: for every decoder-only family, rank 0 leads, the others follow, and the logits and greedy ids equal a
// one-process run's — with a rank's part on cpu and on disk, with speculative decoding's rollback, and with a batch.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/core/process_group.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/causal_lm.h"
#include "ferry/models/pipeline.h"
#include "ferry/text/batch_generate.h"
#include "ferry/text/generate.h"
#include "support/hf_folder.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<ProcessGroup> world() { return world_process_group(); }

// A folder rank 0 writes and every rank reads (the ranks share this machine's /tmp).
fs::path shared_folder(const std::string& name, const nlohmann::json& config) {
  auto w = world();
  std::string path;
  if (w->rank() == 0) {
    path = (fs::temp_directory_path() / ("ferry-mpi-" + std::to_string(::getpid())) / name).string();
    fs::remove_all(path);
    fs::create_directories(path);
    test::write_random_hf_folder(path, config);
  }
  w->broadcast_string(path, 0);
  return path;
}

// The layer-granular map of a decoder-only model, its blocks spread over the ranks in order (the last block's output
// goes back to rank 0), everything else on rank 0. Rank 1's blocks on disk when `rank1_disk`.
DeviceMap ranked_map(const models::CausalLM& model, int ranks, bool rank1_disk) {
  const std::string& layers = model.info().layers_prefix;
  std::vector<std::string> before, blocks, after;
  // Down to the blocks: the modules on the way to them are split into their children.
  std::function<void(const std::string&, const nn::Module&)> walk = [&](const std::string& name, const nn::Module& m) {
    for (const auto& [sub, child] : m.named_children()) {
      const std::string full = name.empty() ? sub : name + "." + sub;
      if (full == layers) {
        for (const auto& [i, block] : child->named_children()) blocks.push_back(full + "." + i);
      } else if (layers.rfind(full + ".", 0) == 0) {
        walk(full, *child);
      } else {
        (blocks.empty() ? before : after).push_back(full);
      }
    }
  };
  walk("", model);
  auto device = [&](int rank) { return (rank == 1 && rank1_disk ? Device::disk() : Device::cpu()).on_rank(rank); };
  DeviceMap map;
  for (const auto& n : before) map.set(n, device(0));
  for (std::size_t i = 0; i < blocks.size(); ++i)
    map.set(blocks[i], device(static_cast<int>(i * static_cast<std::size_t>(ranks) / blocks.size())));
  for (const auto& n : after) map.set(n, device(0));
  return map;
}

TEST(PipelineMpi, EveryFamilyGivesTheOneProcessLogitsAndIds) {
  auto w = world();
  int n = 0;
  for (const auto& [family, config] : test::tiny_causal_configs()) {
    SCOPED_TRACE(family);
    const fs::path folder = shared_folder(family, config);
    auto skeleton = std::dynamic_pointer_cast<models::CausalLM>(models::load_language_model(folder));
    ASSERT_TRUE(skeleton);
    const DeviceMap map = ranked_map(*skeleton, w->size(), /*rank1_disk=*/n % 2 == 1);
    ++n;
    models::FromPretrainedOptions o;
    o.device_map = map;
    o.process_group = w;
    std::shared_ptr<models::LanguageModel> model = models::load_language_model(folder, o);
    ASSERT_EQ(model->hf_device_map(), map);
    if (w->rank() != 0) {
      models::follow_pipeline(*model);
      continue;
    }
    const std::vector<int64_t> prompt = {5, 17, 3, 42, 8, 61, 5, 17, 3};
    // Logits of a prefill, then a step after a rollback (crop), against the one-process model.
    auto run = [&](models::LanguageModel& m) {
      auto seq = m.start_sequence(prompt, DType::F32);
      const Tensor ids = Tensor::from_vector(seq.input, {static_cast<int64_t>(seq.input.size())}, DType::I64);
      std::vector<float> all = m.forward_step(ids, {{{seq.state, ids.size(0)}}}, 0).to_vector<float>();
      seq.state->crop(5);
      const Tensor next = Tensor::from_vector(std::vector<int64_t>{42, 8}, {2}, DType::I64);
      const auto again = m.forward_step(next, {{{seq.state, 2}}}, 1).to_vector<float>();
      all.insert(all.end(), again.begin(), again.end());
      return all;
    };
    const std::vector<float> want = run(*skeleton), got = run(*model);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5f * (1 + std::abs(want[i]))) << i;
    // Greedy ids, plain and with prompt lookup (its rejected proposals are cropped on every rank).
    text::GenerateOptions g;
    g.stop.max_new_tokens = 12;
    const std::vector<text::TokenId> p32(prompt.begin(), prompt.end());
    const auto plain = text::generate(*skeleton, nullptr, p32, g).generated_ids;
    EXPECT_EQ(text::generate(*model, nullptr, p32, g).generated_ids, plain);
    g.speculative.lookup_tokens = 3;
    EXPECT_EQ(text::generate(*model, nullptr, p32, g).generated_ids, plain);
    // A batch: sequences of several lengths join and leave one forward over all of them, on every rank.
    auto batch = [&](models::LanguageModel& m) {
      text::BatchGenerator gen(m, nullptr, {.max_batch_size = 3});
      text::GenerateOptions o2;
      o2.stop.max_new_tokens = 6;
      for (int i = 0; i < 4; ++i) gen.add(std::vector<text::TokenId>(p32.begin() + i, p32.end()), o2);
      std::vector<std::vector<text::TokenId>> out(4);
      for (auto& r : gen.run()) out[static_cast<std::size_t>(r.id)] = r.result.generated_ids;
      return out;
    };
    EXPECT_EQ(batch(*model), batch(*skeleton));
    models::end_pipeline(*model);
  }
  w->barrier();
  if (w->rank() == 0) fs::remove_all(fs::temp_directory_path() / ("ferry-mpi-" + std::to_string(::getpid())));
}

// A forward over several sequences in micro-batches (1, 2, 3 and more than the rows): the logits of every row, and a
// batch's greedy ids, equal one process's; rank 0 learns each rank's busy time.
TEST(PipelineMpi, MicroBatchesGiveTheSameLogitsAndIds) {
  auto w = world();
  int n = 0;
  for (const auto& [family, config] :
       {std::pair{"llama", test::tiny_llama_config()}, std::pair{"gpt2", test::tiny_gpt2_config()}}) {
    SCOPED_TRACE(family);
    const fs::path folder = shared_folder(std::string("micro-") + family, config);
    auto skeleton = std::dynamic_pointer_cast<models::CausalLM>(models::load_language_model(folder));
    ASSERT_TRUE(skeleton);
    for (int micro : {1, 2, 3, 8}) {
      SCOPED_TRACE(micro);
      models::FromPretrainedOptions o;
      o.device_map = ranked_map(*skeleton, w->size(), /*rank1_disk=*/(n++ % 2) == 1);
      o.process_group = w;
      o.pipeline_micro_batches = micro;
      std::shared_ptr<models::LanguageModel> model = models::load_language_model(folder, o);
      if (w->rank() != 0) {
        models::follow_pipeline(*model);
        continue;
      }
      // Five sequences of several lengths in one forward (a prefill each), then one token each.
      const std::vector<std::vector<int64_t>> prompts = {
          {5, 17, 3}, {42, 8}, {61, 5, 17, 3, 9, 11}, {7}, {13, 14, 15, 16}};
      auto run = [&](models::LanguageModel& m) {
        std::vector<models::StepRow> rows;
        std::vector<int64_t> ids;
        for (const auto& p : prompts) {
          rows.push_back({m.start_sequence(p, DType::F32).state, static_cast<int64_t>(p.size())});
          ids.insert(ids.end(), p.begin(), p.end());
        }
        std::vector<float> all =
            m.forward_step(Tensor::from_vector(ids, {static_cast<int64_t>(ids.size())}), rows, 2).to_vector<float>();
        for (auto& r : rows) r.tokens = 1;
        const std::vector<int64_t> next = {1, 2, 3, 4, 5};
        const auto again = m.forward_step(Tensor::from_vector(next, {5}), rows, 1).to_vector<float>();
        all.insert(all.end(), again.begin(), again.end());
        return all;
      };
      const std::vector<float> want = run(*skeleton), got = run(*model);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5f * (1 + std::abs(want[i]))) << i;
      auto batch = [&](models::LanguageModel& m) {
        text::BatchGenerator gen(m, nullptr, {.max_batch_size = 5});
        text::GenerateOptions g;
        g.stop.max_new_tokens = 7;
        for (std::size_t i = 0; i < prompts.size(); ++i)
          gen.add(std::vector<text::TokenId>(prompts[i].begin(), prompts[i].end()), g);
        std::vector<std::vector<text::TokenId>> out(prompts.size());
        for (auto& r : gen.run()) out[static_cast<std::size_t>(r.id)] = r.result.generated_ids;
        return out;
      };
      EXPECT_EQ(batch(*model), batch(*skeleton));
      const models::PipelineTimes t = model->pipeline_leader()->times();
      EXPECT_EQ(t.ranks, w->size());
      EXPECT_EQ(t.micro_batches, std::min(micro, 5));
      ASSERT_EQ(t.busy_seconds.size(), static_cast<std::size_t>(w->size()));
      for (double b : t.busy_seconds) {
        EXPECT_GT(b, 0);
        EXPECT_LE(b, t.forward_seconds * 1.05 + 0.01);
      }
      EXPECT_GE(t.bubble(), 0);
      EXPECT_LT(t.bubble(), 1);
      models::end_pipeline(*model);
    }
  }
  w->barrier();
  if (w->rank() == 0) fs::remove_all(fs::temp_directory_path() / ("ferry-mpi-" + std::to_string(::getpid())));
}

TEST(PipelineMpi, OnlyWholeBlocksGoToOtherRanks) {
  auto w = world();
  const fs::path folder = shared_folder("refused", test::tiny_qwen2_config());  // tied embeddings
  auto skeleton = std::dynamic_pointer_cast<models::CausalLM>(models::load_language_model(folder));
  DeviceMap head_apart = ranked_map(*skeleton, w->size(), false);
  head_apart.set("lm_head", Device::cpu().on_rank(1));
  models::FromPretrainedOptions o;
  o.device_map = head_apart;
  o.process_group = w;
  try {  // every rank refuses the same map, before loading
    models::load_language_model(folder, o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only the decoder blocks"), std::string::npos) << e.what();
  }
  DeviceMap inside;
  inside.set("model.embed_tokens", Device::cpu());
  inside.set("model.layers.0.self_attn", Device::cpu());
  inside.set("model.layers.0.mlp", Device::cpu().on_rank(1));
  inside.set("model.layers.0.input_layernorm", Device::cpu());
  inside.set("model.layers.0.post_attention_layernorm", Device::cpu());
  inside.set("model.layers.1", Device::cpu().on_rank(1));
  inside.set("model.norm", Device::cpu());
  inside.set("model.rotary_emb", Device::cpu());
  inside.set("lm_head", Device::cpu());
  o.device_map = inside;
  try {
    models::load_language_model(folder, o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("whole decoder blocks"), std::string::npos) << e.what();
  }
  DeviceMap too_many = ranked_map(*skeleton, w->size(), false);
  too_many.set("model.layers.1", Device::cpu().on_rank(w->size()));
  o.device_map = too_many;
  try {
    models::load_language_model(folder, o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mpirun -np"), std::string::npos) << e.what();
  }
  w->barrier();
}

TEST(PipelineMpi, AnotherModelOnAnotherRankIsFoundAtStart) {
  auto w = world();
  nlohmann::json other = test::tiny_llama_config();
  other["rms_norm_eps"] = 1e-3;
  const fs::path a = shared_folder("same", test::tiny_llama_config()), b = shared_folder("other", other);
  auto skeleton = std::dynamic_pointer_cast<models::CausalLM>(models::load_language_model(a));
  models::FromPretrainedOptions o;
  o.device_map = ranked_map(*skeleton, w->size(), false);
  o.process_group = w;
  try {  // every rank stops with the same message, before loading
    models::load_language_model(w->rank() == 1 ? b : a, o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 runs another model"), std::string::npos) << e.what();
  }
  w->barrier();
}

}  // namespace
}  // namespace ferry
