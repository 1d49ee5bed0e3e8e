// safetensors reader and writer: round trips, zero-copy views, alignment, casts, sharding and indexes.
#include "ferry/io/safetensors.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ferry/core/convert.h"
#include "ferry/core/mapped_file.h"
#include "ferry/core/memory.h"
#include "ferry/io/checkpoint.h"
#include "io/io_test_util.h"

namespace ferry::io {
namespace {

using iotest::same_bits;
using iotest::TempDir;

// A tensor of `dtype` whose bytes are a counter pattern (every bit pattern is fine: we compare bits).
Tensor pattern(Shape shape, DType dtype, uint8_t seed = 1) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  auto* p = static_cast<uint8_t*>(t.nbytes() ? t.raw_data() : nullptr);
  for (std::size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(seed + i * 7);
  if (dtype == DType::Bool)
    for (std::size_t i = 0; i < t.nbytes(); ++i) p[i] &= 1;
  return t;
}

StateDict every_dtype() {
  StateDict sd;
  uint8_t seed = 1;
  for (DType t : kAllDTypes) sd.insert("t." + std::string(dtype_name(t)), pattern({3, 5}, t, seed++));
  sd.insert("scalar", pattern({}, DType::F32));
  sd.insert("empty", pattern({0, 4}, DType::F16));
  return sd;
}

TEST(Safetensors, RoundTripIsBitExactForEveryDType) {
  TempDir dir;
  const StateDict sd = every_dtype();
  save_safetensors(sd, dir / "m.safetensors");
  const SafetensorsFile f = SafetensorsFile::open(dir / "m.safetensors");
  EXPECT_EQ(f.metadata().at("format"), "pt");
  ASSERT_EQ(f.entries().size(), sd.size());
  for (const auto& [name, t] : sd) EXPECT_TRUE(same_bits(f.get(name), t)) << name;
  const StateDict loaded = f.load();
  EXPECT_EQ(loaded.size(), sd.size());
  EXPECT_EQ(loaded.at("scalar").dim(), 0);
  EXPECT_EQ(loaded.at("empty").shape(), (Shape{0, 4}));
}

TEST(Safetensors, TensorsAreZeroCopyViewsOfTheMapping) {
  TempDir dir;
  StateDict sd;
  sd.insert("a", pattern({256, 64}, DType::F32));
  sd.insert("b", pattern({1000}, DType::BF16));
  save_safetensors(sd, dir / "m.safetensors");
  const MemoryStats before = memory_stats(Device::cpu());
  {
    const StateDict loaded = load_safetensors(dir / "m.safetensors");
    const MemoryStats during = memory_stats(Device::cpu());
    EXPECT_EQ(during.current, before.current) << "loading without a cast must not allocate tensor memory";
    EXPECT_EQ(during.mapped - before.mapped, static_cast<int64_t>(256 * 64 * 4 + 1000 * 2));
    for (const auto& [name, t] : loaded) {
      EXPECT_EQ(t.storage()->kind(), Storage::Kind::MappedView) << name;
      EXPECT_TRUE(t.read_only());
      EXPECT_EQ(t.storage()->nbytes(), t.nbytes()) << "one storage per tensor, so ties are not faked";
    }
    EXPECT_FALSE(loaded.at("a").shares_storage(loaded.at("b")));
  }
  EXPECT_EQ(memory_stats(Device::cpu()).mapped, before.mapped) << "views release the mapping";
}

TEST(Safetensors, DataSectionAndEveryTensorAreAligned) {
  TempDir dir;
  StateDict sd;
  sd.insert("odd_u8", pattern({3}, DType::U8));       // written after the wider types
  sd.insert("f16", pattern({5}, DType::F16));
  sd.insert("f64", pattern({2}, DType::F64));
  sd.insert("f32", pattern({3}, DType::F32));
  save_safetensors(sd, dir / "m.safetensors");
  const std::string bytes = iotest::read_bytes(dir / "m.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(bytes[8 + n - 1] == ' ' || bytes[8 + n - 1] == '}', true);
  const SafetensorsFile f = SafetensorsFile::open(dir / "m.safetensors");
  for (const auto& e : f.entries()) {
    EXPECT_EQ((f.entries().front().begin), 0u);
    EXPECT_EQ(e.begin % dtype_size(e.dtype), 0u) << e.name;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(f.get(e.name).raw_data()) % dtype_size(e.dtype), 0u) << e.name;
  }
  EXPECT_EQ(f.entries().front().name, "f64");
}

TEST(Safetensors, ReadsAHandWrittenReferenceLayoutFile) {
  // Header exactly as huggingface/safetensors writes it: __metadata__ first, offsets tiling the data.
  TempDir dir;
  const float a[2] = {1.5f, -2.0f};
  const uint16_t b[3] = {0x3c00, 0xc000, 0x7c00};  // f16 1, -2, inf
  std::string data(reinterpret_cast<const char*>(a), 8);
  data.append(reinterpret_cast<const char*>(b), 6);
  std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F16","shape":[3,1],"data_offsets":[8,14]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  iotest::write_bytes(dir / "ref.safetensors", iotest::safetensors_bytes(header, data));
  const SafetensorsFile f = SafetensorsFile::open(dir / "ref.safetensors");
  EXPECT_EQ(f.get("a").to_vector<float>(), (std::vector<float>{1.5f, -2.0f}));
  const auto bv = f.get("b").to_vector<float>();
  EXPECT_EQ(bv[0], 1.0f);
  EXPECT_EQ(bv[1], -2.0f);
  EXPECT_TRUE(std::isinf(bv[2]));
  EXPECT_EQ(f.get("b").shape(), (Shape{3, 1}));
  EXPECT_EQ(f.keys(), (std::vector<std::string>{"a", "b"}));
}

TEST(Safetensors, MisalignedTensorInAHandMadeFileIsCopiedNotMisread) {
  TempDir dir;
  const float v[2] = {3.25f, -7.5f};
  std::string data = "x";  // 1 byte of u8 first pushes the f32 tensor off its alignment
  data.append(reinterpret_cast<const char*>(v), 8);
  const std::string header =
      R"({"pad":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"v":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})";
  iotest::write_bytes(dir / "m.safetensors", iotest::safetensors_bytes(header + std::string(8 - header.size() % 8, ' '), data));
  const Tensor t = SafetensorsFile::open(dir / "m.safetensors").get("v");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 4, 0u);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{3.25f, -7.5f}));
}

TEST(Safetensors, GetWithDTypeConvertsAndSameDTypeStaysAView) {
  TempDir dir;
  StateDict sd;
  sd.insert("w", Tensor::from_vector(std::vector<float>{1.0f, 1.00390625f, -3.5f, 65504.0f}, {2, 2}));
  sd.insert("ids", Tensor::from_vector(std::vector<int64_t>{1, -2}, {2}));
  save_safetensors(sd, dir / "m.safetensors");
  const SafetensorsFile f = SafetensorsFile::open(dir / "m.safetensors");
  const Tensor same = f.get("w", DType::F32);
  EXPECT_EQ(same.storage()->kind(), Storage::Kind::MappedView);
  const Tensor bf = f.get("w", DType::BF16);
  EXPECT_EQ(bf.dtype(), DType::BF16);
  EXPECT_FALSE(bf.read_only());
  EXPECT_TRUE(same_bits(bf, sd.at("w").to(DType::BF16)));
  const StateDict cast = f.load(DType::F16);
  EXPECT_EQ(cast.at("w").dtype(), DType::F16);
  EXPECT_EQ(cast.at("ids").dtype(), DType::I64) << "integer tensors keep their dtype";
}

TEST(Safetensors, ReadIntoConvertsStraightIntoAnExistingTensor) {
  TempDir dir;
  StateDict sd;
  sd.insert("w", Tensor::from_vector(std::vector<float>{1.0f, -2.5f, 3.25f, 0.5f}, {2, 2}, DType::BF16));
  save_safetensors(sd, dir / "m.safetensors");
  const SafetensorsFile f = SafetensorsFile::open(dir / "m.safetensors");
  Tensor dst = Tensor::zeros({2, 2}, DType::F32);
  const void* before = dst.raw_data();
  f.read_into("w", dst);
  EXPECT_EQ(dst.raw_data(), before) << "written in place";
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{1.0f, -2.5f, 3.25f, 0.5f}));
  Tensor same = Tensor::zeros({2, 2}, DType::BF16);
  f.read_into("w", same);
  EXPECT_TRUE(same_bits(same, sd.at("w")));
  Tensor wrong = Tensor::zeros({4}, DType::F32);
  EXPECT_FERRY_ERROR(f.read_into("w", wrong), "destination has shape [4], the file has [2, 2]");
  Tensor view = f.get("w");
  EXPECT_FERRY_ERROR(f.read_into("w", view), "destination tensor is not writable");
}

TEST(Safetensors, UnknownTensorNameIsAnErrorNamingFileAndTensor) {
  TempDir dir;
  StateDict sd;
  sd.insert("a", pattern({2}, DType::F32));
  save_safetensors(sd, dir / "m.safetensors");
  EXPECT_FERRY_ERROR(SafetensorsFile::open(dir / "m.safetensors").get("nope"), "m.safetensors: nope");
}

TEST(Safetensors, WriterRefusesMetaTensors) {
  TempDir dir;
  StateDict sd;
  sd.insert("m", Tensor::empty({2}, DType::F32, Device::meta()));
  EXPECT_FERRY_ERROR(save_safetensors(sd, dir / "m.safetensors"), "meta tensor has no data");
  EXPECT_FALSE(std::filesystem::exists(dir / "m.safetensors")) << "no partial file is left behind";
}

TEST(Safetensors, ShardedSaveWritesShardsAndIndexAndLoadsBack) {
  TempDir dir;
  StateDict sd;
  for (int i = 0; i < 5; ++i) sd.insert("layer." + std::to_string(i) + ".w", pattern({100}, DType::F32, i));  // 400 B
  const ShardedSave s = save_sharded_safetensors(sd, dir.path(), 1000);
  ASSERT_EQ(s.shards.size(), 3u);  // 400+400 | 400+400 | 400
  EXPECT_EQ(s.shards[0].filename(), "model-00001-of-00003.safetensors");
  ASSERT_TRUE(s.index);
  const auto index = nlohmann::json::parse(iotest::read_bytes(*s.index));
  EXPECT_EQ(index["metadata"]["total_size"], 2000);
  EXPECT_EQ(index["weight_map"]["layer.4.w"], "model-00003-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"].size(), 5u);
  const StateDict back = load_checkpoint(dir.path());
  ASSERT_EQ(back.size(), 5u);
  for (const auto& [name, t] : sd) EXPECT_TRUE(same_bits(back.at(name), t)) << name;
}

TEST(Safetensors, TensorLargerThanTheShardLimitGetsItsOwnShard) {
  TempDir dir;
  StateDict sd;
  sd.insert("small", pattern({10}, DType::U8));
  sd.insert("big", pattern({100}, DType::F32));
  sd.insert("tail", pattern({10}, DType::U8));
  const ShardedSave s = save_sharded_safetensors(sd, dir.path(), 64);
  ASSERT_EQ(s.shards.size(), 3u);
  EXPECT_EQ(s.weight_map.at("big"), "model-00002-of-00003.safetensors");
}

TEST(Safetensors, SingleShardSaveWritesModelSafetensorsAndRemovesAStaleIndex) {
  TempDir dir;
  StateDict sd;
  sd.insert("a", pattern({100}, DType::F32));
  sd.insert("b", pattern({100}, DType::F32));
  save_sharded_safetensors(sd, dir.path(), 500);  // two shards + index
  ASSERT_TRUE(std::filesystem::exists(dir / "model.safetensors.index.json"));
  const ShardedSave s = save_sharded_safetensors(sd, dir.path(), 1 << 20);
  EXPECT_FALSE(s.index);
  EXPECT_TRUE(std::filesystem::exists(dir / "model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors.index.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "model-00001-of-00002.safetensors"));
  EXPECT_EQ(load_checkpoint(dir.path()).size(), 2u);
}

TEST(Safetensors, HeaderParserIsExposedForInspection) {
  const std::string file = iotest::safetensors_bytes(
      R"({"__metadata__":{"k":"v"},"x":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0'));
  const SafetensorsHeader h =
      parse_safetensors_header(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "mem");
  EXPECT_EQ(h.metadata.at("k"), "v");
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].dtype, DType::I64);
  EXPECT_EQ(h.data_start, file.size() - 8);
}

}  // namespace
}  // namespace ferry::io
