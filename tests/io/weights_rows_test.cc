// Rows of an offloaded table (WeightsMap::get_rows, StagedReader::read_rows): what an embedding lookup reads. The
// rows must equal the table's for every kind of entry (RAM, .dat, safetensors with and without a cast, a byte window
// of a file) and every reader path; under a staged reader only the blocks around the rows are read; bad rows and a
// truncated file are errors naming the key or the file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

#include "ferry/core/error.h"
#include "ferry/io/offload.h"
#include "ferry/io/safetensors.h"
#include "ferry/io/staged_reader.h"
#include "ferry/io/weights_cache.h"
#include "support/error_of.h"
#include "support/hf_folder.h"

namespace ferry::io {
namespace {

namespace fs = std::filesystem;

std::string bytes_of(const Tensor& t) { return std::string(static_cast<const char*>(t.raw_data()), t.nbytes()); }

// Rows `rows` of `t`, one at a time through Tensor::select (the reference for gather_rows).
std::string rows_of(const Tensor& t, const std::vector<int64_t>& rows) {
  std::string out;
  for (int64_t r : rows) out += bytes_of(t.select(r).clone());
  return out;
}

Tensor random_table(int64_t rows, int64_t cols, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n;
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  for (float& x : v) x = n(rng);
  return Tensor::from_vector(v, {rows, cols}, dtype);
}

struct Mode {
  const char* name;
  bool io_uring, direct;
};
const Mode kModes[] = {{"io_uring+O_DIRECT", true, true},
                       {"pread+O_DIRECT", false, true},
                       {"io_uring+buffered", true, false}};

// Rows that start and end mid-block (750 f32 = 3000 bytes each), the first and the last, neighbours that share a read,
// and rows far apart that do not.
TEST(StagedReaderRows, RowsAnywhereInTheFileReadTheirBytesOnEveryPath) {
  test::TempDir dir;
  const Tensor table = random_table(3000, 750, DType::F32, 1);  // 9 MB
  std::string file_bytes(123, 'x');                             // the table starts mid-block
  file_bytes += bytes_of(table);
  const fs::path file = dir.path() / "t.bin";
  std::ofstream(file, std::ios::binary).write(file_bytes.data(), static_cast<std::streamsize>(file_bytes.size()));
  const FileRange range{file, 123, table.nbytes()};
  const std::vector<std::vector<int64_t>> cases = {{0}, {2999}, {1, 2, 3}, {0, 5, 1500, 2998, 2999}, {7, 9, 2000}};
  for (const Mode& m : kModes) {
    SCOPED_TRACE(m.name);
    StagedReader reader({.use_io_uring = m.io_uring, .direct = m.direct});
    std::uint64_t rows = 0;
    for (const auto& c : cases) {
      std::string out(c.size() * 3000, '\0');
      reader.read_rows(range, 3000, c, out.data());
      EXPECT_EQ(out, rows_of(table, c)) << c.size() << " rows from " << c[0];
      rows += c.size();
    }
    const StagedReaderStats s = reader.stats();
    EXPECT_EQ(s.rows, rows);
    EXPECT_EQ(s.tensors, 0u) << "row reads are not staged tensors";
    EXPECT_LT(s.bytes_read, 300u << 10) << "the blocks around the rows, not the table";
    EXPECT_EQ(s.pool_peak, 0u) << "nothing taken from the pool";
  }
}

TEST(StagedReaderRows, BadRowsAndATruncatedFileAreErrorsNamingTheFile) {
  test::TempDir dir;
  const Tensor table = random_table(100, 1024, DType::F32, 2);
  const fs::path file = dir.path() / "t.bin";
  std::ofstream(file, std::ios::binary)
      .write(static_cast<const char*>(table.raw_data()), static_cast<std::streamsize>(table.nbytes()));
  StagedReader reader;
  std::string out(4096, '\0');
  const std::vector<int64_t> past{100}, negative{-1}, last{99};
  EXPECT_NE(test::error_of([&] {
              reader.read_rows({file, 0, table.nbytes()}, 4096, past, out.data());
            }).find("outside the 100 rows"),
            std::string::npos);
  EXPECT_THROW(reader.read_rows({file, 0, table.nbytes()}, 4096, negative, out.data()), Error);
  fs::resize_file(file, 50 * 4096);
  const std::string e = test::error_of([&] { reader.read_rows({file, 0, table.nbytes()}, 4096, last, out.data()); });
  EXPECT_NE(e.find("the file ends at byte"), std::string::npos) << e;
  EXPECT_NE(e.find(file.string()), std::string::npos) << e;
}

// Every kind of loader entry gives the table's rows; a staged loader reads only their blocks.
TEST(WeightsRows, EveryEntryKindGivesTheTablesRows) {
  test::TempDir dir;
  const Tensor table = random_table(4000, 64, DType::BF16, 3);  // 128-byte rows, 512 KB
  StateDict sd;
  sd.insert("model.embed_tokens.weight", table);
  save_safetensors(sd, dir.path() / "model.safetensors");
  fs::create_directory(dir.path() / "offload");
  OffloadIndex index;
  index["st"] = OffloadEntry{.safetensors_file = "../model.safetensors", .weight_name = "model.embed_tokens.weight"};
  index["st_f32"] = OffloadEntry{.dtype = DType::F32,
                                 .safetensors_file = "../model.safetensors",
                                 .weight_name = "model.embed_tokens.weight"};
  offload_weight(table, "dat", dir.path() / "offload", index);
  save_offload_index(index, dir.path() / "offload");
  const std::vector<int64_t> rows{0, 17, 18, 2500, 3999};
  const std::string want = rows_of(table, rows);
  for (const bool staged : {false, true}) {
    SCOPED_TRACE(staged ? "staged" : "mapped");
    StateDict ram;
    ram.insert("ram", table);
    auto w = std::make_shared<OffloadedWeightsLoader>(ram, dir.path() / "offload");
    auto reader = std::make_shared<StagedReader>();
    if (staged) w->set_staged_reader(reader);
    for (const char* key : {"ram", "st", "dat"}) {
      const Tensor t = w->get_rows(key, rows);
      EXPECT_EQ(t.shape(), (Shape{5, 64})) << key;
      EXPECT_EQ(t.dtype(), DType::BF16) << key;
      EXPECT_EQ(bytes_of(t), want) << key;
    }
    const Tensor cast = w->get_rows("st_f32", rows);
    EXPECT_EQ(cast.dtype(), DType::F32);
    EXPECT_EQ(bytes_of(cast.to(DType::BF16)), want);
    if (staged) {
      EXPECT_EQ(reader->stats().rows, 3 * rows.size()) << "st, dat and st_f32 read by the row";
      EXPECT_LT(reader->stats().bytes_read, 3u * 5 * 8192) << "a block or two per row";
    }
    // The maps that wrap a loader pass row reads on.
    const PrefixedDataset prefixed(w, "model");
    AliasedWeightsMap aliased(w, {{"lm_head.weight", "dat"}});
    CachedWeightsMap cached(w, 1 << 20, [](const std::string&) { return true; });
    EXPECT_EQ(bytes_of(aliased.get_rows("lm_head.weight", rows)), want);
    EXPECT_EQ(bytes_of(cached.get_rows("dat", rows)), want);
    cached.get("dat");  // now held: rows from the cached tensor
    EXPECT_EQ(bytes_of(cached.get_rows("dat", rows)), want);
    EXPECT_EQ(cached.stats().hits, 0u);
    (void)prefixed;
    // No rows: an empty table of the right width.
    EXPECT_EQ(w->get_rows("dat", {}).shape(), (Shape{0, 64}));
  }
  // The prefix is applied.
  StateDict under;
  under.insert("model.embed_tokens.weight", table);
  const PrefixedDataset prefixed(std::make_shared<OffloadedWeightsLoader>(under), "model.embed_tokens");
  EXPECT_EQ(bytes_of(prefixed.get_rows("weight", rows)), want);
}

TEST(WeightsRows, RowsOutOfRangeOrOutOfOrderAreErrorsNamingTheKey) {
  test::TempDir dir;
  fs::create_directory(dir.path() / "offload");
  OffloadIndex index;
  offload_weight(random_table(10, 4, DType::F32, 4), "emb", dir.path() / "offload", index);
  offload_weight(Tensor::full({}, 1.0, DType::F32), "scalar", dir.path() / "offload", index);
  save_offload_index(index, dir.path() / "offload");
  for (const bool staged : {false, true}) {
    OffloadedWeightsLoader w({}, dir.path() / "offload");
    if (staged) w.set_staged_reader(std::make_shared<StagedReader>());
    const std::vector<int64_t> past{3, 10}, unordered{4, 2}, repeated{2, 2};
    for (const auto* bad : {&past, &unordered, &repeated}) {
      const std::string e = test::error_of([&] { w.get_rows("emb", *bad); });
      EXPECT_NE(e.find("emb"), std::string::npos) << e;
    }
    EXPECT_NE(test::error_of([&] { w.get_rows("emb", past); }).find("outside the tensor's 10 rows"), std::string::npos);
    EXPECT_NE(test::error_of([&] { w.get_rows("scalar", std::vector<int64_t>{0}); }).find("0-d"), std::string::npos);
    EXPECT_THROW(w.get_rows("absent", std::vector<int64_t>{0}), Error);
  }
}

}  // namespace
}  // namespace ferry::io
