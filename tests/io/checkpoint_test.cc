// Checkpoint discovery: files, indexes, folders, preference order, Hugging Face cache symlinks, and checks that
// happen before any loading.
#include "ferry/io/checkpoint.h"

#include <gtest/gtest.h>

#include "ferry/core/logging.h"
#include "ferry/io/safetensors.h"
#include "io/io_test_util.h"
#include "support/torch_bin_writer.h"

namespace fs = std::filesystem;

namespace ferry::io {
namespace {

using iotest::TempDir;

StateDict small(float base = 0) {
  StateDict sd;
  sd.insert("a.weight", Tensor::from_vector(std::vector<float>{base + 1, base + 2}, {2}));
  sd.insert("b.weight", Tensor::from_vector(std::vector<float>{base + 3, base + 4, base + 5}, {3}));
  sd.insert("c.bias", Tensor::from_vector(std::vector<float>{base + 6}, {1}));
  return sd;
}

TEST(Checkpoint, SingleFilesAreRecognisedByExtensionOrContent) {
  TempDir dir;
  save_safetensors(small(), dir / "w.safetensors");
  testing::save_torch_bin(small(), dir / "w.bin");
  fs::copy_file(dir / "w.bin", dir / "w.ckpt");
  fs::copy_file(dir / "w.safetensors", dir / "w.weights");
  EXPECT_EQ(get_checkpoint_shard_files(dir / "w.safetensors").format, CheckpointFormat::Safetensors);
  EXPECT_EQ(get_checkpoint_shard_files(dir / "w.bin").format, CheckpointFormat::TorchBin);
  EXPECT_EQ(checkpoint_file_format(dir / "w.ckpt"), CheckpointFormat::TorchBin);
  EXPECT_EQ(checkpoint_file_format(dir / "w.weights"), CheckpointFormat::Safetensors);
  EXPECT_EQ(load_state_dict(dir / "w.ckpt").at("b.weight").to_vector<float>(), (std::vector<float>{3, 4, 5}));
  const CheckpointFiles f = get_checkpoint_shard_files(dir / "w.safetensors");
  ASSERT_EQ(f.shards.size(), 1u);
  EXPECT_TRUE(f.weight_map.empty());
  EXPECT_FALSE(f.index_file);
}

TEST(Checkpoint, IndexListsSortedUniqueShards) {
  TempDir dir;
  save_sharded_safetensors(small(), dir.path(), 8);  // one tensor per shard
  const CheckpointFiles f = get_checkpoint_shard_files(dir / "model.safetensors.index.json");
  ASSERT_EQ(f.shards.size(), 3u);
  EXPECT_EQ(f.shards[0].filename(), "model-00001-of-00003.safetensors");
  EXPECT_EQ(f.shards[2].filename(), "model-00003-of-00003.safetensors");
  EXPECT_EQ(f.weight_map.at("c.bias"), "model-00003-of-00003.safetensors");
  EXPECT_EQ(f.format, CheckpointFormat::Safetensors);
}

TEST(Checkpoint, FolderPrefersSafetensorsAndLogsTheChoice) {
  TempDir dir;
  save_safetensors(small(1), dir / "model.safetensors");
  testing::save_torch_bin(small(100), dir / "pytorch_model.bin");
  ScopedLogCapture logs;
  const CheckpointFiles f = get_checkpoint_shard_files(dir.path());
  EXPECT_EQ(f.format, CheckpointFormat::Safetensors);
  EXPECT_TRUE(logs.contains("using model.safetensors")) << "the choice is logged";
  EXPECT_EQ(load_checkpoint(dir.path()).at("a.weight").to_vector<float>(), (std::vector<float>{2, 3}));
}

TEST(Checkpoint, FolderWithShardedBinLoadsEveryShard) {
  TempDir dir;
  StateDict s1, s2;
  s1.insert("a.weight", small().at("a.weight"));
  s2.insert("b.weight", small().at("b.weight"));
  testing::save_torch_bin(s1, dir / "pytorch_model-00001-of-00002.bin");
  testing::save_torch_bin(s2, dir / "pytorch_model-00002-of-00002.bin");
  iotest::write_bytes(dir / "pytorch_model.bin.index.json",
                      R"({"metadata":{"total_size":20},"weight_map":{"a.weight":"pytorch_model-00001-of-00002.bin",)"
                      R"("b.weight":"pytorch_model-00002-of-00002.bin"}})");
  const CheckpointFiles f = get_checkpoint_shard_files(dir.path());
  EXPECT_EQ(f.format, CheckpointFormat::TorchBin);
  EXPECT_EQ(f.shards.size(), 2u);
  const StateDict sd = load_checkpoint(dir.path());
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"a.weight", "b.weight"}));
}

TEST(Checkpoint, FolderFallsBackToTheOnlySafetensorsFile) {
  TempDir dir;
  save_safetensors(small(), dir / "consolidated.safetensors");
  EXPECT_EQ(get_checkpoint_shard_files(dir.path()).shards.at(0).filename(), "consolidated.safetensors");
}

TEST(Checkpoint, HuggingFaceHubCacheSymlinksAreAccepted) {
  // models--org--name/snapshots/<rev>/model.safetensors -> ../../blobs/<sha>, as huggingface_hub lays it out.
  TempDir dir;
  const fs::path repo = dir / "models--org--tiny";
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / "abc123");
  save_sharded_safetensors(small(), repo / "blobs", 8);
  for (const char* n : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                        "model-00003-of-00003.safetensors", "model.safetensors.index.json"}) {
    fs::rename(repo / "blobs" / n, repo / "blobs" / (std::string("sha-") + n));
    fs::create_symlink(fs::path("../../blobs") / (std::string("sha-") + n), repo / "snapshots" / "abc123" / n);
  }
  const StateDict sd = load_checkpoint(repo / "snapshots" / "abc123");
  EXPECT_EQ(sd.size(), 3u);
}

TEST(Checkpoint, SymlinkInsideTheFolderIsFine) {
  TempDir dir;
  save_safetensors(small(), dir / "real.safetensors");
  fs::create_symlink("real.safetensors", dir / "model.safetensors");
  EXPECT_EQ(load_checkpoint(dir.path()).size(), 3u);
}

TEST(Checkpoint, EveryMissingShardIsNamedBeforeLoading) {
  TempDir dir;
  save_safetensors(small(), dir / "present.safetensors");
  iotest::write_bytes(dir / "model.safetensors.index.json",
                      R"({"weight_map":{"a.weight":"present.safetensors","b.weight":"gone-1.safetensors",)"
                      R"("c.bias":"gone-2.safetensors"}})");
  try {
    get_checkpoint_shard_files(dir.path());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("gone-1.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("gone-2.safetensors"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("present.safetensors"), std::string::npos) << msg;
  }
}

TEST(Checkpoint, IndexThatMisplacesATensorIsAnError) {
  TempDir dir;
  StateDict s1, s2;
  s1.insert("a.weight", small().at("a.weight"));
  s2.insert("b.weight", small().at("b.weight"));
  save_safetensors(s1, dir / "s1.safetensors");
  save_safetensors(s2, dir / "s2.safetensors");
  iotest::write_bytes(dir / "model.safetensors.index.json",
                      R"({"weight_map":{"a.weight":"s2.safetensors","b.weight":"s2.safetensors"}})");
  EXPECT_FERRY_ERROR(load_checkpoint(dir.path()), "a.weight: the index places this tensor in s2.safetensors");
}

TEST(Checkpoint, MissingPathIsAClearError) {
  TempDir dir;
  EXPECT_FERRY_ERROR_KIND(get_checkpoint_shard_files(dir / "nope"), ErrorKind::NotFound, "checkpoint not found");
  // Opening a file that is not there is NotFound (errno ENOENT); one that is there but no file is InvalidValue.
  EXPECT_FERRY_ERROR_KIND(load_safetensors(dir / "nope.safetensors"), ErrorKind::NotFound, "No such file");
  EXPECT_FERRY_ERROR_KIND(load_safetensors(dir.path()), ErrorKind::InvalidValue, "not a regular file");
}

TEST(Checkpoint, PlainFileNames) {
  EXPECT_TRUE(is_plain_file_name("model-00001-of-00002.safetensors"));
  EXPECT_FALSE(is_plain_file_name(""));
  EXPECT_FALSE(is_plain_file_name(".."));
  EXPECT_FALSE(is_plain_file_name("a/b"));
  EXPECT_FALSE(is_plain_file_name("a\\b"));
  EXPECT_FALSE(is_plain_file_name(std::string("a\0b", 3)));
}

}  // namespace
}  // namespace ferry::io
