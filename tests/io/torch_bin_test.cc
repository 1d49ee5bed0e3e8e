// PyTorch .bin loading from archives laid out exactly as torch.save writes them (tests/support/torch_bin_writer):
// values, zero-copy, strides, shared storages, compression, ZIP64, fp8 and the pickle's variants.
#include "ferry/io/torch_bin.h"

#include <gtest/gtest.h>

#include "ferry/core/convert.h"
#include "io/io_test_util.h"
#include "io/torch_pickle.h"
#include "support/torch_bin_writer.h"

namespace ferry::io {
namespace {

using iotest::same_bits;
using iotest::TempDir;
using testing::TorchBinOptions;
using testing::TorchStorageSpec;
using testing::TorchTensorSpec;

std::string floats(std::initializer_list<float> v) {
  return std::string(reinterpret_cast<const char*>(std::data(v)), v.size() * sizeof(float));
}
std::string iota_floats(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    const float f = static_cast<float>(i);
    s.append(reinterpret_cast<const char*>(&f), 4);
  }
  return s;
}

StateDict sample_state_dict() {
  StateDict sd;
  sd.insert("embed.weight", Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2}));
  sd.insert("norm.weight", Tensor::from_vector(std::vector<float>{0.5f, -0.25f}, {2}, DType::F16));
  sd.insert("proj.weight", Tensor::from_vector(std::vector<float>{1.5f, 2.5f, -3.0f, 1e-3f}, {2, 2}, DType::BF16));
  sd.insert("position_ids", Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 1LL << 40}, {1, 4}));
  sd.insert("mask", Tensor::from_vector(std::vector<int64_t>{1, 0, 1}, {3}, DType::Bool));
  sd.insert("step", Tensor::from_vector(std::vector<int32_t>{7}, {}));
  sd.insert("empty", Tensor::empty({0, 3}, DType::F32));
  return sd;
}

void expect_same_state_dict(const StateDict& got, const StateDict& want) {
  ASSERT_EQ(got.keys(), want.keys());
  for (const auto& [name, t] : want) EXPECT_TRUE(same_bits(got.at(name), t)) << name;
}

TEST(TorchBin, LoadsAStateDictLaidOutLikeTorchSave) {
  TempDir dir;
  const StateDict sd = sample_state_dict();
  testing::save_torch_bin(sd, dir / "pytorch_model.bin");
  expect_same_state_dict(load_torch_bin(dir / "pytorch_model.bin"), sd);
}

TEST(TorchBin, StoredEntriesAreZeroCopyAndAligned) {
  TempDir dir;
  testing::save_torch_bin(sample_state_dict(), dir / "m.bin");
  const StateDict sd = load_torch_bin(dir / "m.bin");
  const Tensor& w = sd.at("embed.weight");
  EXPECT_EQ(w.storage()->kind(), Storage::Kind::MappedView);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(w.raw_data()) % 64, 0u) << "torch aligns storages to 64 bytes";
}

TEST(TorchBin, PlainDictsAndParameterWrappersLoadToo) {
  TempDir dir;
  TorchBinOptions plain;
  plain.ordered_dict = false;
  plain.archive_name = "pytorch_model";  // torch < 2.x named the folder after the file
  const std::vector<TorchStorageSpec> storages = {{"0", DType::F32, floats({1, 2, 3})}};
  testing::write_torch_bin(dir / "m.bin", {{"p", "0", {3}, {}, 0, /*as_parameter=*/true}}, storages, plain);
  const StateDict sd = load_torch_bin(dir / "m.bin");
  EXPECT_EQ(sd.at("p").to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(TorchBin, SharedStoragesStayShared) {
  // Tied embeddings (two names, one view) and a fused weight split into views at different offsets.
  TempDir dir;
  const std::vector<TorchStorageSpec> storages = {{"0", DType::F32, iota_floats(6)}, {"1", DType::F32, iota_floats(8)}};
  testing::write_torch_bin(dir / "m.bin",
                           {{"wte.weight", "0", {3, 2}},
                            {"lm_head.weight", "0", {3, 2}},
                            {"q.weight", "1", {2, 2}, {}, 0},
                            {"k.weight", "1", {2, 2}, {}, 4}},
                           storages);
  const StateDict sd = load_torch_bin(dir / "m.bin");
  EXPECT_TRUE(sd.at("wte.weight").is_same(sd.at("lm_head.weight")));
  EXPECT_TRUE(sd.at("q.weight").shares_storage(sd.at("k.weight")));
  EXPECT_FALSE(sd.at("q.weight").is_same(sd.at("k.weight")));
  EXPECT_EQ(sd.at("k.weight").to_vector<float>(), (std::vector<float>{4, 5, 6, 7}));
}

TEST(TorchBin, UnalignedStoredEntriesAreCopiedOnceAndStayShared) {
  TempDir dir;
  TorchBinOptions unaligned;
  unaligned.alignment = 0;  // as Python's zipfile would write them
  const std::vector<TorchStorageSpec> storages = {{"0", DType::F64, std::string(48, '\x01')}};
  testing::write_torch_bin(dir / "m.bin", {{"a", "0", {3}}, {"b", "0", {3}, {}, 3}}, storages, unaligned);
  const StateDict sd = load_torch_bin(dir / "m.bin");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(sd.at("b").raw_data()) % 8, 0u);
  EXPECT_TRUE(sd.at("a").shares_storage(sd.at("b")));
  EXPECT_EQ(iotest::bytes_of(sd.at("b")), std::string(24, '\x01'));
}

TEST(TorchBin, NonContiguousTensorsAreMaterialisedCorrectly) {
  TempDir dir;
  const std::vector<TorchStorageSpec> storages = {{"0", DType::F32, iota_floats(12)}};
  testing::write_torch_bin(dir / "m.bin",
                           {{"transposed", "0", {4, 3}, {1, 4}},        // (3x4 row-major).T
                            {"column", "0", {3}, {4}, 1},                // storage[1, 5, 9]
                            {"expanded", "0", {2, 3}, {0, 1}, 2},        // rows broadcast from storage[2..4]
                            {"strided_3d", "0", {2, 2, 2}, {6, 1, 3}}},  // permuted
                           storages);
  const StateDict sd = load_torch_bin(dir / "m.bin");
  EXPECT_EQ(sd.at("transposed").to_vector<float>(), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(sd.at("column").to_vector<float>(), (std::vector<float>{1, 5, 9}));
  EXPECT_EQ(sd.at("expanded").to_vector<float>(), (std::vector<float>{2, 3, 4, 2, 3, 4}));
  EXPECT_EQ(sd.at("strided_3d").to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 6, 9, 7, 10}));
  EXPECT_EQ(sd.at("transposed").storage()->kind(), Storage::Kind::Owned);
}

TEST(TorchBin, CompressedArchivesAreInflated) {
  TempDir dir;
  TorchBinOptions deflate;
  deflate.compress = true;
  const StateDict sd = sample_state_dict();
  testing::save_torch_bin(sd, dir / "m.bin", deflate);
  const StateDict back = load_torch_bin(dir / "m.bin");
  expect_same_state_dict(back, sd);
  EXPECT_EQ(back.at("embed.weight").storage()->kind(), Storage::Kind::Owned);
}

TEST(TorchBin, Zip64ArchivesLoad) {
  TempDir dir;
  TorchBinOptions z64;
  z64.zip64 = true;
  const StateDict sd = sample_state_dict();
  testing::save_torch_bin(sd, dir / "m.bin", z64);
  expect_same_state_dict(load_torch_bin(dir / "m.bin"), sd);
}

TEST(TorchBin, Fp8TensorsRoundTripThroughRebuildTensorV3) {
  TempDir dir;
  StateDict sd;
  Tensor a = Tensor::empty({4}, DType::F8_E4M3FN), b = Tensor::empty({2, 2}, DType::F8_E5M2);
  const uint8_t bits[4] = {0x00, 0x7e, 0xfe, 0x01};
  std::memcpy(a.raw_data(), bits, 4);
  std::memcpy(b.raw_data(), bits, 4);
  sd.insert("a", a);
  sd.insert("b", b);
  testing::save_torch_bin(sd, dir / "m.bin");
  expect_same_state_dict(load_torch_bin(dir / "m.bin"), sd);
}

TEST(TorchBin, DTypeCastConvertsFloatsOnlyAndKeepsTies) {
  TempDir dir;
  const std::vector<TorchStorageSpec> storages = {
      {"0", DType::BF16, testing::tensor_bytes(Tensor::from_vector(std::vector<float>{1, -2}, {2}, DType::BF16))},
      {"1", DType::I64, testing::tensor_bytes(Tensor::from_vector(std::vector<int64_t>{5}, {1}))}};
  testing::write_torch_bin(dir / "m.bin", {{"a", "0", {2}}, {"tied", "0", {2}}, {"ids", "1", {1}}}, storages);
  const StateDict sd = load_torch_bin(dir / "m.bin", DType::F32);
  EXPECT_EQ(sd.at("a").dtype(), DType::F32);
  EXPECT_EQ(sd.at("a").to_vector<float>(), (std::vector<float>{1, -2}));
  EXPECT_TRUE(sd.at("a").is_same(sd.at("tied")));
  EXPECT_EQ(sd.at("ids").dtype(), DType::I64);
}

TEST(TorchBin, ReadsTheFileWithoutTheByteorderRecord) {
  TempDir dir;
  TorchBinOptions old;
  old.write_byteorder = false;  // PyTorch < 1.12
  testing::save_torch_bin(sample_state_dict(), dir / "m.bin", old);
  EXPECT_EQ(load_torch_bin(dir / "m.bin").size(), sample_state_dict().size());
}

TEST(TorchPickle, AcceptsProtocol4SpellingsOfTheSameOperations) {
  // FRAME, SHORT_BINUNICODE, MEMOIZE and STACK_GLOBAL (what pickle_protocol=4 writes) for a one-tensor dict.
  using namespace std::string_literals;
  const std::string p = "\x80\x04"s + "\x95"s + std::string(8, '\0') +  // PROTO 4, FRAME
                        "}\x94("s +                                     // EMPTY_DICT MEMOIZE MARK
                        "\x8c\x01w\x94"s +                              // 'w'
                        "\x8c\x0ctorch._utils\x94\x8c\x12_rebuild_tensor_v2\x94\x93\x94"s +
                        "(("s +                                         // MARK args, MARK persistent id
                        "\x8c\x07storage\x8c\x05torch\x8c\x0c"s + "FloatStorage\x93"s +  // 'storage', STACK_GLOBAL
                        "\x8c\x01"s + "0\x8c\x03"s + "cpuK\x02t\x94Q"s +  // key, location, numel; TUPLE; BINPERSID
                        "K\x00K\x02\x85K\x01\x85\x89}tR"s +             // offset, (2,), (1,), False, {}; TUPLE REDUCE
                        "u."s;                                          // SETITEMS STOP
  const auto sd = detail::unpickle_state_dict(reinterpret_cast<const uint8_t*>(p.data()), p.size(), "mem");
  ASSERT_EQ(sd.tensors.size(), 1u);
  EXPECT_EQ(sd.tensors[0].name, "w");
  EXPECT_EQ(sd.tensors[0].size, (Shape{2}));
  EXPECT_EQ(sd.tensors[0].dtype, DType::F32);
  EXPECT_EQ(sd.storages[0].numel, 2);
}

TEST(TorchPickle, ErrorsNameThePickleByteOffset) {
  const std::string p = std::string("\x80\x02", 2) + "cos\nsystem\n";
  EXPECT_FERRY_ERROR(detail::unpickle_state_dict(reinterpret_cast<const uint8_t*>(p.data()), p.size(), "mem"),
                     "(pickle byte 2)");
}

}  // namespace
}  // namespace ferry::io
