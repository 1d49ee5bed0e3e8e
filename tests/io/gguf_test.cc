// GGUF reading: a file made by ferry's test builder and one made by llama.cpp's `gguf` package
// (tests/reference/gguf_oracle.py), metadata of every type, tensors in ggml and torch order, zero-copy f32/f16,
// dequantized q8_0, and a table of malformed files with the error each must give.
#include "ferry/io/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>

#include "ferry/core/convert.h"
#include "ferry/core/storage.h"
#include "support/error_of.h"
#include "support/hf_folder.h"

namespace ferry::io {
namespace {

// Writes GGUF bytes field by field; `tensor` records an info and its data, `bytes()` lays out the file.
struct GgufBuilder {
  uint32_t magic = 0x46554747, version = 3;
  std::optional<uint64_t> kv_count_override, tensor_count_override;
  uint64_t alignment = 32;
  std::vector<uint8_t> kv;  // encoded key/value pairs
  uint64_t n_kv = 0;
  struct T {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::vector<uint8_t> data;
    std::optional<uint64_t> offset;  // forced data offset
    std::optional<uint32_t> n_dims;  // forced dimension count
  };
  std::vector<T> tensors;

  static void put(std::vector<uint8_t>& b, const void* p, std::size_t n) {
    b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  }
  template <class V>
  static void pod(std::vector<uint8_t>& b, V v) {
    put(b, &v, sizeof v);
  }
  static void str(std::vector<uint8_t>& b, const std::string& s) {
    pod<uint64_t>(b, s.size());
    put(b, s.data(), s.size());
  }
  // A key with an already-encoded value (type tag included).
  GgufBuilder& raw_kv(const std::string& key, const std::vector<uint8_t>& typed_value) {
    str(kv, key);
    kv.insert(kv.end(), typed_value.begin(), typed_value.end());
    ++n_kv;
    return *this;
  }
  template <class V>
  GgufBuilder& kv_pod(const std::string& key, GgufValueType t, V v) {
    std::vector<uint8_t> b;
    pod<uint32_t>(b, static_cast<uint32_t>(t));
    pod(b, v);
    return raw_kv(key, b);
  }
  GgufBuilder& kv_str(const std::string& key, const std::string& v) {
    std::vector<uint8_t> b;
    pod<uint32_t>(b, static_cast<uint32_t>(GgufValueType::String));
    str(b, v);
    return raw_kv(key, b);
  }
  GgufBuilder& tensor(T t) {
    tensors.push_back(std::move(t));
    return *this;
  }
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> b;
    pod(b, magic);
    pod(b, version);
    pod<uint64_t>(b, tensor_count_override.value_or(tensors.size()));
    pod<uint64_t>(b, kv_count_override.value_or(n_kv));
    b.insert(b.end(), kv.begin(), kv.end());
    uint64_t next = 0;
    std::vector<uint64_t> offsets;
    for (const auto& t : tensors) {
      str(b, t.name);
      pod<uint32_t>(b, t.n_dims.value_or(static_cast<uint32_t>(t.dims.size())));
      for (uint64_t d : t.dims) pod(b, d);
      pod(b, t.type);
      const uint64_t off = t.offset.value_or(next);
      pod(b, off);
      offsets.push_back(off);
      next = (off + t.data.size() + alignment - 1) / alignment * alignment;
    }
    const std::size_t data_start = (b.size() + alignment - 1) / alignment * alignment;
    b.resize(data_start, 0);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (b.size() < data_start + offsets[i] + tensors[i].data.size()) b.resize(data_start + offsets[i] + tensors[i].data.size(), 0);
      std::memcpy(b.data() + data_start + offsets[i], tensors[i].data.data(), tensors[i].data.size());
    }
    return b;
  }
};

std::vector<uint8_t> f32_data(std::vector<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

GgufBuilder valid() {
  GgufBuilder g;
  g.kv_str("general.architecture", "llama").kv_pod("llama.block_count", GgufValueType::U32, uint32_t{2});
  g.tensor({"w", {3, 2}, 0, f32_data({1, 2, 3, 4, 5, 6}), {}, {}});
  std::vector<uint8_t> q8(34, 0);
  const uint16_t d = f32_to_f16(0.25f);
  std::memcpy(q8.data(), &d, 2);
  for (int i = 0; i < 32; ++i) q8[2 + i] = static_cast<uint8_t>(int8_t(i - 16));
  g.tensor({"q", {32, 1}, 8, q8, {}, {}});
  return g;
}

TEST(Gguf, ParsesMetadataTensorsAndShapes) {
  const auto bytes = valid().bytes();
  GgufFile f = GgufFile::parse(bytes, "mem");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.require_string("general.architecture"), "llama");
  EXPECT_EQ(f.require_int("llama.block_count"), 2);
  EXPECT_EQ(f.get_string("absent"), std::nullopt);
  EXPECT_NE(test::error_of([&] { f.get_string("llama.block_count"); }).find("must be a string, not u32"), std::string::npos);
  EXPECT_NE(test::error_of([&] { f.require_int("llama.context_length"); }).find("missing metadata key"), std::string::npos);
  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensorInfo& w = f.tensor_info("w");
  EXPECT_EQ(w.dims, (std::vector<uint64_t>{3, 2}));
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  EXPECT_EQ(w.nbytes, 24u);
  EXPECT_EQ(w.offset % 32, 0u);
  EXPECT_EQ(f.tensor_info("q").nbytes, 34u);
  EXPECT_NE(test::error_of([&] { f.tensor_info("nope"); }).find("no tensor"), std::string::npos);
}

TEST(Gguf, OpenedFileGivesZeroCopyPlainAndQuantizedTensors) {
  test::TempDir dir;
  const auto path = dir.path() / "m.gguf";
  const auto bytes = valid().bytes();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  GgufFile f = GgufFile::open(path);
  Tensor w = f.tensor("w");
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  EXPECT_EQ(w.storage()->kind(), Storage::Kind::MappedView);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  Tensor q = f.tensor("q");
  EXPECT_EQ(q.shape(), (Shape{1, 32}));
  EXPECT_EQ(q.dtype(), DType::Q8_0);  // its blocks, zero-copy
  EXPECT_EQ(q.storage()->kind(), Storage::Kind::MappedView);
  EXPECT_EQ(q.to_vector<float>()[0], -4.0f);
  EXPECT_EQ(q.to_vector<float>()[31], 3.75f);
}

TEST(Gguf, MalformedFilesAreErrorsThatSayWhatIsWrong) {
  // An edit changes the builder (before the bytes are laid out) or the bytes (after).
  struct Edit {
    std::function<void(GgufBuilder&)> on_builder;
    std::function<void(std::vector<uint8_t>&)> on_bytes;
  };
  auto builder = [](std::function<void(GgufBuilder&)> f) { return Edit{std::move(f), {}}; };
  auto bytes_edit = [](std::function<void(std::vector<uint8_t>&)> f) { return Edit{{}, std::move(f)}; };
  auto array_of = [](uint32_t elem, uint64_t n, std::vector<uint8_t> payload) {
    std::vector<uint8_t> b;
    GgufBuilder::pod<uint32_t>(b, 9);
    GgufBuilder::pod<uint32_t>(b, elem);
    GgufBuilder::pod<uint64_t>(b, n);
    b.insert(b.end(), payload.begin(), payload.end());
    return b;
  };
  struct Case {
    const char* name;
    Edit edit;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"empty", bytes_edit([](auto& b) { b.clear(); }), "too short for the magic"},
      {"wrong magic", builder([](auto& g) { g.magic = 0x4c4d4747; }), "not a GGUF file"},
      {"version 1", builder([](auto& g) { g.version = 1; }), "version 1"},
      {"version 7", builder([](auto& g) { g.version = 7; }), "unknown GGUF version 7"},
      {"big-endian", builder([](auto& g) { g.version = 0x03000000; }), "big-endian"},
      {"truncated header", bytes_edit([](auto& b) { b.resize(10); }), "truncated: the tensor count"},
      {"huge metadata count", builder([](auto& g) { g.kv_count_override = uint64_t(1) << 60; }), "metadata entries cannot fit"},
      {"key past the end",
       Edit{[](auto& g) { g.kv_count_override = 1; }, [](auto& b) { b.resize(24 + 8 + 5); }}, "truncated: a key"},
      {"unknown value type", builder([](auto& g) { g.kv_pod("x", GgufValueType(13), uint8_t{0}); }), "unknown metadata value type 13"},
      {"bool of 2", builder([](auto& g) { g.kv_pod("x", GgufValueType::Bool, uint8_t{2}); }), "neither 0 nor 1"},
      {"string past the end", builder([](auto& g) { g.kv_pod("x", GgufValueType::String, uint64_t{1} << 40); }), "truncated: a string"},
      {"unknown array element", builder([&](auto& g) { g.raw_kv("x", array_of(42, 1, {0})); }), "unknown array element type 42"},
      {"huge array", builder([&](auto& g) { g.raw_kv("x", array_of(4, uint64_t(1) << 40, {})); }), "cannot fit"},
      {"arrays nested too deep",
       builder([&](auto& g) {
         std::vector<uint8_t> inner;  // array<array<array<u8>>>: element type 9 twice
         GgufBuilder::pod<uint32_t>(inner, 9);
         GgufBuilder::pod<uint64_t>(inner, 1);
         GgufBuilder::pod<uint32_t>(inner, 9);
         GgufBuilder::pod<uint64_t>(inner, 1);
         GgufBuilder::pod<uint32_t>(inner, 0);
         GgufBuilder::pod<uint64_t>(inner, 0);
         g.raw_kv("x", array_of(9, 1, inner));
       }),
       "nested deeper"},
      {"duplicate key", builder([](auto& g) { g.kv_str("general.architecture", "again"); }), "duplicate metadata key"},
      {"alignment not a power of two", builder([](auto& g) { g.kv_pod("general.alignment", GgufValueType::U32, uint32_t{48}); }), "not a power of two"},
      {"alignment of the wrong type", builder([](auto& g) { g.kv_str("general.alignment", "32"); }), "must be a u32"},
      {"huge tensor count", builder([](auto& g) { g.tensor_count_override = uint64_t(1) << 58; }), "tensors cannot fit"},
      {"duplicate tensor", builder([](auto& g) { g.tensor({"w", {3}, 0, f32_data({1, 2, 3}), {}, {}}); }), "duplicate tensor name"},
      {"no dimensions", builder([](auto& g) { g.tensors[0].n_dims = 0; g.tensors[0].dims.clear(); }), "0 dimensions"},
      {"five dimensions", builder([](auto& g) { g.tensors[0].dims = {1, 1, 1, 1, 6}; }), "5 dimensions"},
      {"removed ggml type", builder([](auto& g) { g.tensors[0].type = 4; }), "unknown ggml type 4"},
      {"partial block", builder([](auto& g) { g.tensors[1].dims = {33, 1}; }), "not a whole number of q8_0 blocks"},
      {"misaligned offset", builder([](auto& g) { g.tensors[1].offset = 40; }), "not a multiple of the alignment"},
      {"data past the end", bytes_edit([](auto& b) { b.erase(b.end() - 3, b.end()); }), "run past the end"},
      {"overlapping tensors", builder([](auto& g) { g.tensors[1].offset = 0; }), "overlaps"},
      {"dimensions overflow", builder([](auto& g) { g.tensors[0].dims = {uint64_t(1) << 40, uint64_t(1) << 40}; }), "overflow"},
  };
  ASSERT_GE(cases.size(), 20u);
  for (const Case& c : cases) {
    GgufBuilder g = valid();
    if (c.edit.on_builder) c.edit.on_builder(g);
    std::vector<uint8_t> b = g.bytes();
    if (c.edit.on_bytes) c.edit.on_bytes(b);
    const std::string msg = test::error_of([&] { GgufFile::parse(b, "bad.gguf"); });
    EXPECT_NE(msg.find(c.want), std::string::npos) << c.name << ": " << msg;
    EXPECT_NE(msg.find("bad.gguf"), std::string::npos) << c.name << ": " << msg;
  }
}

TEST(Gguf, ReadsWhatLlamaCppsGgufPackageWrites) {
  auto python = test::reference_python(FERRY_SOURCE_DIR);
  if (!python) GTEST_SKIP() << "no reference venv (scripts/venv)";
  test::TempDir dir;
  ASSERT_EQ(test::run_reference_script(*python, "gguf_oracle.py", {"file", dir.path().string()},
                                       dir.path() / "oracle.log"),
            "");
  GgufFile f = GgufFile::open(dir.path() / "oracle.gguf");
  EXPECT_EQ(f.require_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("t.u8"), 200);
  EXPECT_EQ(f.get_int("t.i8"), -100);
  EXPECT_EQ(f.get_int("t.u16"), 65000);
  EXPECT_EQ(f.get_int("t.i16"), -32000);
  EXPECT_EQ(f.get_int("t.u32"), 4000000000LL);
  EXPECT_EQ(f.get_int("t.i32"), -2000000000LL);
  EXPECT_EQ(f.find("t.u64")->value.get<uint64_t>(), (uint64_t(1) << 63) + 5);
  EXPECT_NE(test::error_of([&] { f.get_int("t.u64"); }).find("64 signed bits"), std::string::npos);
  EXPECT_EQ(f.get_int("t.i64"), -(int64_t(1) << 62));
  EXPECT_EQ(f.get_float("t.f32"), 0.25);
  EXPECT_EQ(f.get_float("t.f64"), 1e-300);
  EXPECT_EQ(f.get_bool("t.bool"), true);
  EXPECT_EQ(f.get_string("t.str"), "h\xc3\xa9llo \xe2\x9c\x93");
  EXPECT_EQ(f.find("t.arr_str")->value, nlohmann::json::array({"a", "", "\xc3\x9f"}));
  EXPECT_EQ(f.find("t.arr_str")->element_type, GgufValueType::String);
  EXPECT_EQ(f.find("t.arr_i32")->value, nlohmann::json::array({1, -2, 3}));
  EXPECT_EQ(f.find("t.arr_f32")->value, nlohmann::json::array({0.5, -1.5}));
  std::ifstream in(dir.path() / "oracle.json");
  const auto want = nlohmann::json::parse(in)["tensors"];
  ASSERT_EQ(f.tensors().size(), want.size());
  for (const auto& [name, w] : want.items()) {
    Tensor t = f.tensor(name);
    EXPECT_EQ(std::string(ggml_type_info(f.tensor_info(name).type).name), w["type"].get<std::string>()) << name;
    EXPECT_EQ(t.shape(), w["shape"].get<Shape>()) << name;
    EXPECT_EQ(t.to_vector<float>(), w["values"].get<std::vector<float>>()) << name;
  }
}

}  // namespace
}  // namespace ferry::io
