// summarize_model: what `ferry inspect` prints — architecture, parameter count (ties once), dtypes, shards and the
// tensor table — read from headers without loading the weights.
#include "ferry/models/model_summary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/core/error.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

namespace fs = std::filesystem;

TEST(ModelSummary, SingleFileUntied) {
  test::TempDir dir;
  auto model = test::write_random_hf_folder(dir.path(), test::tiny_llama_config(), DType::F16);
  const ModelSummary s = summarize_model(dir.path());
  EXPECT_EQ(s.info.architecture, "LlamaForCausalLM");
  EXPECT_EQ(s.info.block_class, "LlamaDecoderLayer");
  EXPECT_EQ(s.config_dtype, DType::F16);
  EXPECT_EQ(s.format, io::CheckpointFormat::Safetensors);
  EXPECT_FALSE(s.sharded);
  int64_t params = 0;
  for (const auto& [name, t] : model->named_parameters()) params += t.numel();
  EXPECT_EQ(s.parameter_count, params);
  EXPECT_EQ(s.checkpoint_elements, params);
  ASSERT_EQ(s.shards.size(), 1u);
  EXPECT_EQ(s.shards[0].file, "model.safetensors");
  EXPECT_EQ(s.shards[0].file_bytes, fs::file_size(dir.path() / "model.safetensors"));
  EXPECT_EQ(s.shards[0].tensor_count, model->state_dict().size());
  EXPECT_EQ(s.shards[0].tensor_bytes, static_cast<uint64_t>(params) * 2);
  ASSERT_EQ(s.stored_dtypes.size(), 1u);
  EXPECT_EQ(s.stored_dtypes[0], (std::pair<DType, int64_t>{DType::F16, params}));
  ASSERT_EQ(s.tensors.size(), model->state_dict().size());
  bool found = false;
  for (const CheckpointTensorInfo& t : s.tensors) {
    if (t.name != "model.layers.1.mlp.down_proj.weight") continue;
    found = true;
    EXPECT_EQ(t.shape, (Shape{32, 48}));
    EXPECT_EQ(t.dtype, DType::F16);
    EXPECT_EQ(t.nbytes, 32u * 48u * 2u);
    EXPECT_EQ(t.file, "model.safetensors");
  }
  EXPECT_TRUE(found);
}

TEST(ModelSummary, ShardedAndTiedCountsTheTieOnce) {
  test::TempDir dir;
  auto model = test::write_random_hf_folder(dir.path(), test::tiny_gpt2_config(), DType::F32, 16000);
  const ModelSummary s = summarize_model(dir.path());
  EXPECT_TRUE(s.sharded);
  EXPECT_GT(s.shards.size(), 1u);
  std::size_t tensors = 0;
  for (const CheckpointShardInfo& shard : s.shards) tensors += shard.tensor_count;
  EXPECT_EQ(tensors, s.tensors.size());
  int64_t params = 0;
  for (const auto& [name, t] : model->named_parameters()) params += t.numel();  // lm_head tied: listed once
  EXPECT_EQ(s.parameter_count, params);
  EXPECT_EQ(s.checkpoint_elements, params);  // save_pretrained does not store the tied head
  EXPECT_EQ(s.info.architecture, "GPT2LMHeadModel");
}

TEST(ModelSummary, BadFolderIsAnError) {
  test::TempDir dir;
  EXPECT_THROW(summarize_model(dir.path()), Error);
}

}  // namespace
}  // namespace ferry::models
