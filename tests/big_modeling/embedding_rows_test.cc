// An offloaded embedding reads only the rows its ids pick (AlignDevicesHook, nn::Module::row_lookup_parameter): the
// output is the resident one bit for bit, the staged reader reads rows and never the table, the prefetcher leaves the
// table alone, bad ids give the resident error, and a table tied to a head is still read whole once per forward (by
// the head) while the lookup reads its rows.
#include <gtest/gtest.h>

#include "dispatch_support.h"
#include "ferry/big_modeling/dispatch.h"
#include "ferry/core/memory.h"
#include "ferry/io/offload.h"
#include "ferry/io/staged_reader.h"
#include "ferry/nn/embedding.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/module_tensors.h"
#include "support/error_of.h"

namespace ferry {
namespace {

using test::same_values;
using test::ScratchDir;

constexpr int64_t kVocab = 1000, kDim = 64;

// ids -> embedding -> head (its own weight, or the embedding's when tied).
struct EmbedHead : nn::Module {
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<nn::Linear> head;
  explicit EmbedHead(bool tied) {
    emb = register_module("emb", std::make_shared<nn::Embedding>(kVocab, kDim));
    head = register_module("head", std::make_shared<nn::Linear>(kDim, kVocab, false));
    if (tied) head->register_parameter("weight", emb->parameter_slot("weight"));
  }
  nn::Value forward(const nn::Args& args) override { return (*head)((*emb)(nn::Args{args[0]}).tensor()); }
  using nn::Module::operator();
};

void copy_weights(const nn::Module& from, nn::Module& to) {
  for (auto& [name, t] : from.state_dict()) nn::set_module_tensor_to_device(to, name, Device::cpu(), t.clone());
}

Tensor ids(std::vector<int64_t> v) {
  const auto n = static_cast<int64_t>(v.size());
  return Tensor::from_vector(v, {1, n});
}

class EmbeddingRows : public test::WithVirtualDevices {};

TEST_F(EmbeddingRows, AnEmbeddingOnDiskReadsOnlyTheRowsItsIdsPick) {
  EmbedHead reference(false);
  const Tensor x = ids({5, 5, 999, 0, 17});
  const Tensor expected = reference(x).to(Device::cpu());
  for (const int prefetch : {0, 2}) {
    SCOPED_TRACE(prefetch);
    ScratchDir dir;
    auto reader = std::make_shared<io::StagedReader>();
    EmbedHead m(false);
    copy_weights(reference, m);
    dispatch_model(m, DeviceMap{{"emb", Device::disk()}, {"head", Device::cpu()}},
                   {.offload_dir = dir.path, .prefetch = prefetch, .staged_reader = reader});
    EXPECT_TRUE(same_values(m(x), expected));
    EXPECT_EQ(reader->stats().rows, 4u) << "5, 999, 0 and 17, once each";
    EXPECT_TRUE(same_values(m(x), expected)) << "again";
    EXPECT_EQ(reader->stats().rows, 8u);
    EXPECT_EQ(reader->stats().tensors, 0u) << "the table is never read whole";
    EXPECT_LT(reader->stats().bytes_read, 8u * 8192);
    // Between calls the table is back on meta, with its own shape.
    EXPECT_TRUE(m.emb->weight().is_meta());
    EXPECT_EQ(m.emb->weight().shape(), (Shape{kVocab, kDim}));
    // i32 ids, and ids of another shape, read their rows too.
    const Tensor x32 = Tensor::from_vector(std::vector<int32_t>{3, 1, 3, 2}, {2, 2});
    EXPECT_TRUE(same_values(m(x32), reference(x32)));
    EXPECT_EQ(reader->stats().rows, 11u);
  }
}

TEST_F(EmbeddingRows, IdsOutsideTheVocabularyGiveTheResidentError) {
  EmbedHead reference(false);
  const Tensor bad = ids({3, kVocab + 4});
  const std::string resident = test::error_of([&] { reference(bad); });
  EXPECT_NE(resident.find("outside the vocabulary"), std::string::npos) << resident;
  ScratchDir dir;
  EmbedHead m(false);
  copy_weights(reference, m);
  dispatch_model(m, DeviceMap{{"emb", Device::disk()}, {"head", Device::cpu()}}, {.offload_dir = dir.path});
  EXPECT_EQ(test::error_of([&] { m(bad); }), resident);
  EXPECT_TRUE(m.emb->weight().is_meta()) << "the failed call put the table back";
  EXPECT_EQ(m.emb->weight().shape(), (Shape{kVocab, kDim}));
  EXPECT_TRUE(same_values(m(ids({1, 2})), reference(ids({1, 2})))) << "and the next call works";
}

// A tied head reads the whole table for every forward anyway; the lookup before it reads its rows, so the table is
// read once per forward, not twice.
TEST_F(EmbeddingRows, ATableTiedToAHeadIsReadWholeOnlyByTheHead) {
  EmbedHead reference(true);
  const Tensor x = ids({7, 8, 9});
  const Tensor expected = reference(x);
  ScratchDir dir;
  auto reader = std::make_shared<io::StagedReader>();
  EmbedHead m(true);
  copy_weights(reference, m);
  dispatch_model(m, DeviceMap{{"emb", Device::disk()}, {"head", Device::disk()}},
                 {.offload_dir = dir.path, .prefetch = 0, .staged_reader = reader});
  EXPECT_TRUE(same_values(m(x), expected));
  EXPECT_TRUE(same_values(m(x), expected));
  EXPECT_EQ(reader->stats().rows, 6u);
  EXPECT_EQ(reader->stats().tensors, 2u) << "the head's weight, once per forward";
  EXPECT_TRUE(m.emb->weight().is_same(m.head->weight())) << "still tied";
}

// Offloaded to the cpu for an accelerator: only the rows travel to the device.
TEST_F(EmbeddingRows, CpuOffloadForAnAcceleratorCopiesOnlyTheRows) {
  EmbedHead reference(false);
  const Tensor x = ids({4, 400});
  const Tensor expected = reference(x);
  EmbedHead m(false);
  copy_weights(reference, m);
  dispatch_model(m, DeviceMap{{"emb", Device::cpu()}, {"head", Device::virt(0)}}, {.main_device = Device::virt(0)});
  EXPECT_TRUE(same_values(m(x).to(Device::cpu()), expected));
  const int64_t table = kVocab * kDim * 4;  // the head's weight is that size too, and lives on the device
  EXPECT_LT(memory_stats(Device::virt(0)).peak, table + table / 4) << "the table never went to the device whole";
}

}  // namespace
}  // namespace ferry
