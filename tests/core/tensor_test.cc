#include "ferry/core/tensor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ferry/core/error.h"
#include "ferry/core/mapped_file.h"
#include "ferry/core/memory.h"

namespace ferry {
namespace {

TEST(Tensor, FactoriesAndAccessors) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_THROW(t.size(2), Error);
  EXPECT_EQ(t.data<float>()[4], 5.0f);
  EXPECT_THROW(t.data<int64_t>(), Error);
  EXPECT_EQ(Tensor::zeros({3}, DType::I64).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(Tensor::full({2}, 1.5, DType::BF16).to_vector<float>(), (std::vector<float>{1.5f, 1.5f}));
  EXPECT_EQ(t.str(), "Tensor[f32 [2, 3] cpu]");
  EXPECT_FALSE(Tensor().defined());
}

TEST(Tensor, HandlesShareBytesCloneCopies) {
  Tensor a = Tensor::from_vector<float>({1, 2}, {2});
  Tensor b = a;
  EXPECT_TRUE(a.is_same(b));
  b.data<float>()[0] = 7;
  EXPECT_EQ(a.data<float>()[0], 7);
  Tensor c = a.clone();
  EXPECT_FALSE(c.is_same(a));
  c.data<float>()[0] = 9;
  EXPECT_EQ(a.data<float>()[0], 7);
}

TEST(Tensor, DTypeConversion) {
  Tensor a = Tensor::from_vector<float>({1.0f, 0.1f, -2.5f}, {3});
  EXPECT_TRUE(a.to(DType::F32).is_same(a));  // same dtype: no copy
  Tensor h = a.to(DType::F16);
  EXPECT_EQ(h.dtype(), DType::F16);
  EXPECT_EQ(h.to_vector<float>()[1], 0.0999755859375f);
  EXPECT_EQ(a.to(DType::I64).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, -2}));
}

TEST(Tensor, MetaRulesFollowAccelerate) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor m = a.to(Device::meta());
  EXPECT_TRUE(m.is_meta());
  EXPECT_EQ(m.shape(), a.shape());
  EXPECT_THROW(m.raw_data(), Error);
  EXPECT_EQ(m.to(DType::F16).dtype(), DType::F16);  // dtype changes are fine on meta
  try {
    m.to(Device::cpu());
    FAIL() << "moving off meta without data must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot move meta tensor"), std::string::npos);
  }
  EXPECT_THROW(a.to(Device::disk()), Error);
}

TEST(Tensor, MetaTensorsAllocateNothing) {
  auto before = memory_stats(Device::cpu()).current;
  Tensor big = Tensor::empty({100000, 100000}, DType::F32, Device::meta());  // 40 GB if it were real
  EXPECT_EQ(big.nbytes(), 40000000000u);
  EXPECT_EQ(memory_stats(Device::cpu()).current, before);
}

TEST(Tensor, AllocationsAreCountedAndReleased) {
  auto before = memory_stats(Device::cpu());
  {
    Tensor t = Tensor::empty({1024, 256}, DType::F32);
    EXPECT_EQ(memory_stats(Device::cpu()).current, before.current + 1024 * 256 * 4);
    EXPECT_GE(memory_stats(Device::cpu()).peak, before.current + 1024 * 256 * 4);
  }
  EXPECT_EQ(memory_stats(Device::cpu()).current, before.current);
  reset_peak_memory_stats(Device::cpu());
  EXPECT_EQ(memory_stats(Device::cpu()).peak, before.current);
}

// Large host buffers start on a 2 MiB boundary (so transparent huge pages can back them) and are not padded to
// whole huge pages: the counted bytes are the tensor's own.
TEST(Tensor, LargeHostBuffersAreHugePageAligned) {
  const int64_t before = memory_stats(Device::cpu()).current;
  {
    Tensor big = Tensor::empty({(int64_t{2} << 20) + 12}, DType::U8);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big.raw_data()) % (std::uintptr_t{2} << 20), 0u);
    EXPECT_EQ(memory_stats(Device::cpu()).current - before, (int64_t{2} << 20) + 12);
    Tensor small = Tensor::empty({1000}, DType::U8);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small.raw_data()) % 64, 0u);
  }
  EXPECT_EQ(memory_stats(Device::cpu()).current, before);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor rows = t.slice(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_TRUE(rows.shares_storage(t));
  EXPECT_EQ(t.select(2).to_vector<float>(), (std::vector<float>{4, 5}));
  EXPECT_EQ(t.select(2).shape(), (Shape{2}));
  EXPECT_EQ(t.reshape({-1}).shape(), (Shape{6}));
  EXPECT_EQ(t.reshape({2, -1}).shape(), (Shape{2, 3}));
  EXPECT_THROW(t.reshape({4, -1}), Error);
  EXPECT_THROW(t.reshape({-1, -1}), Error);
  EXPECT_THROW(t.slice(2, 4), Error);
  EXPECT_THROW(t.slice(-1, 1), Error);
}

TEST(Tensor, ShapeChecks) {
  EXPECT_THROW(shape_numel({-1, 2}), Error);
  EXPECT_THROW(shape_numel({int64_t(1) << 40, int64_t(1) << 40}), Error);
  EXPECT_EQ(shape_numel({}), 1);
  EXPECT_EQ(shape_numel({0, 5}), 0);
  EXPECT_THROW(Tensor::from_vector<float>({1, 2, 3}, {2, 2}), Error);
}

TEST(Tensor, CopyFromConvertsAndChecksShape) {
  Tensor dst = Tensor::zeros({3}, DType::BF16);
  dst.copy_from(Tensor::from_vector<float>({1, 2, 3}, {3}));
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_THROW(dst.copy_from(Tensor::zeros({4}, DType::F32)), Error);
}

TEST(Tensor, MappedViewsAreZeroCopyAndKeepTheFileAlive) {
  auto path = std::filesystem::temp_directory_path() / "ferry_tensor_mapped_test.bin";
  {
    std::vector<float> v{10, 20, 30, 40};
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), 16);
  }
  Tensor t;
  {
    auto file = MappedFile::open(path);
    auto mapped_before = memory_stats(Device::cpu()).mapped;
    t = Tensor::from_storage(Storage::view(file, 4, 12), 0, {3}, DType::F32);
    EXPECT_EQ(memory_stats(Device::cpu()).mapped, mapped_before + 12);
    EXPECT_EQ(t.raw_data(), file->data() + 4);
    EXPECT_THROW(Storage::view(file, 8, 16), Error);
  }
  std::filesystem::remove(path);  // the mapping outlives the name and the MappedFile handle
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{20, 30, 40}));
  EXPECT_TRUE(t.read_only());
  EXPECT_THROW(t.copy_from(Tensor::zeros({3}, DType::F32)), Error);
  EXPECT_THROW(MappedFile::open("/nonexistent/ferry.bin"), Error);
}

TEST(MappedFile, PopulateReadsAndMapsTheRangeBeforeReturning) {
  auto path = std::filesystem::temp_directory_path() / "ferry_mapped_populate_test.bin";
  const std::size_t size = 4u << 20;
  {
    std::vector<char> bytes(size, 7);
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(size));
  }
  const int fd = ::open(path.c_str(), O_RDONLY);
  ::fsync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  auto file = MappedFile::open(path);
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  auto resident_pages = [&](std::size_t offset, std::size_t len) {
    std::vector<unsigned char> in(len / page);
    ::mincore(const_cast<uint8_t*>(file->data()) + offset, len, in.data());
    std::size_t n = 0;
    for (unsigned char c : in) n += c & 1;
    return n;
  };
  if (resident_pages(0, size) > size / page / 10) {
    std::filesystem::remove(path);
    GTEST_SKIP() << "this filesystem keeps evicted pages";
  }
  EXPECT_TRUE(file->populate(size / 2, size / 4));  // synchronous: no waiting needed
  EXPECT_EQ(resident_pages(size / 2, size / 4), size / 4 / page);
  EXPECT_FALSE(file->populate(size / 2, size / 4));  // resident now: nothing to do
  EXPECT_FALSE(file->populate(size, 100));           // past the end: nothing
  file->populate(0, 1u << 30);  // clipped to the file (readahead may have brought it all in already)
  EXPECT_EQ(resident_pages(0, size), size / page);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ferry
