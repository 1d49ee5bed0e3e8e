// Speculative decoding with the model on an accelerator — wholly, and split over the accelerator, cpu and disk: prompt
// lookup and a draft (on the cpu) give plain greedy decoding's ids there. Runs on a virtual accelerator everywhere
// (host memory behind the accelerator's dispatch and staging) and on cuda:0 where there is one (CudaSpeculative*,
// skipped without a GPU).
#include <gtest/gtest.h>

#include "ferry/core/backend.h"
#include "ferry/models/auto_model.h"
#include "ferry/nn/init.h"
#include "ferry/text/generate.h"
#include "support/cuda_device.h"
#include "support/hf_folder.h"

namespace ferry::text {
namespace {

void expect_speculation_matches_plain(Device accelerator) {
  test::TempDir dir, draft_dir, offload("ferry-offload");
  nn::manual_seed(21);
  test::write_random_hf_folder(dir.path(), test::tiny_llama_config());
  nlohmann::json draft_config = test::tiny_llama_config();
  draft_config["num_hidden_layers"] = 1;
  test::write_random_hf_folder(draft_dir.path(), draft_config);
  auto draft = models::load_language_model(draft_dir.path());
  const std::vector<TokenId> prompt = {5, 17, 3, 42, 8, 61, 5, 17, 3, 42, 8};
  for (const DeviceMap& map : {DeviceMap{{"", accelerator}}, DeviceMap{{"model.embed_tokens", accelerator},
                                                                       {"model.rotary_emb", accelerator},
                                                                       {"model.layers.0", Device::cpu()},
                                                                       {"model.layers.1", Device::disk()},
                                                                       {"model.norm", accelerator},
                                                                       {"lm_head", accelerator}}}) {
    SCOPED_TRACE(map.to_json());
    models::FromPretrainedOptions o;
    o.device_map = map;
    o.offload_folder = offload.path();
    auto model = models::load_language_model(dir.path(), o);
    GenerateOptions g;
    g.stop.max_new_tokens = 16;
    const auto plain = generate(*model, nullptr, prompt, g).generated_ids;
    g.speculative.lookup_tokens = 4;
    const GenerateResult lookup = generate(*model, nullptr, prompt, g);
    EXPECT_EQ(lookup.generated_ids, plain);
    EXPECT_GT(lookup.speculative.proposed, 0u);
    g.speculative.lookup_tokens = 0;
    g.speculative.draft = draft.get();
    g.speculative.draft_confidence = 0;  // always proposes: every step checks proposals on the accelerator
    const GenerateResult drafted = generate(*model, nullptr, prompt, g);
    EXPECT_EQ(drafted.generated_ids, plain);
    EXPECT_GT(drafted.speculative.proposed, 0u);
  }
}

TEST(SpeculativeDevice, MatchesPlainOnAVirtualAccelerator) {
  enable_virtual_devices(VirtualDeviceOptions{});
  expect_speculation_matches_plain(Device::virt(0));
  disable_virtual_devices();
}

TEST(CudaSpeculative, MatchesPlainOnTheGpu) {
  FERRY_REQUIRE_CUDA();
  expect_speculation_matches_plain(Device::cuda(0));
}

}  // namespace
}  // namespace ferry::text
