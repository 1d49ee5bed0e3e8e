// ProcessGroup over MPI, run by ctest under `mpirun -np 2` and `-np 3` (tests/CMakeLists.txt): every rank runs each
// test; messages go between real processes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/core/process_group.h"

namespace ferry {
namespace {

std::shared_ptr<ProcessGroup> world() { return world_process_group(); }

// Distinct, rank- and tag-dependent contents.
Tensor pattern(DType dtype, Shape shape, int seed) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  auto* b = static_cast<uint8_t*>(t.raw_data());
  for (std::size_t i = 0; i < t.nbytes(); ++i)
    b[i] = static_cast<uint8_t>((i * 131 + static_cast<std::size_t>(seed) * 7) % 251);
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

TEST(ProcessGroupMpi, IsMpiWorldOfSeveralRanks) {
  auto w = world();
  EXPECT_EQ(w->backend(), "mpi");
  EXPECT_GE(w->size(), 2);
  EXPECT_GE(w->rank(), 0);
  EXPECT_LT(w->rank(), w->size());
  EXPECT_TRUE(process_groups_available());
  EXPECT_EQ(w->timeout().count(), 120000);  // FERRY_PG_TIMEOUT=120, set by ctest
}

TEST(ProcessGroupMpi, TensorsGoAroundTheRingBitExact) {
  auto w = world();
  const int next = (w->rank() + 1) % w->size(), prev = (w->rank() + w->size() - 1) % w->size();
  for (DType dtype : {DType::F32, DType::BF16, DType::I64, DType::Q4_0}) {
    const Shape shape = dtype == DType::Q4_0 ? Shape{3, 64} : Shape{5, 7};
    const Tensor mine = pattern(dtype, shape, w->rank());
    if (w->rank() % 2 == 0) {  // even ranks send first, so no pair waits on each other
      w->send_tensor(mine, next, 11);
      Tensor got = w->recv_tensor(prev, 11);
      EXPECT_TRUE(same_bytes(got, pattern(dtype, shape, prev))) << dtype_name(dtype);
    } else {
      Tensor got = w->recv_tensor(prev, 11);
      w->send_tensor(mine, next, 11);
      EXPECT_TRUE(same_bytes(got, pattern(dtype, shape, prev))) << dtype_name(dtype);
    }
  }
  w->barrier();
}

TEST(ProcessGroupMpi, BroadcastFromEveryRoot) {
  auto w = world();
  for (int root = 0; root < w->size(); ++root) {
    Tensor t = w->rank() == root ? pattern(DType::F16, {4, 9}, 100 + root) : Tensor();
    w->broadcast_tensor(t, root);
    EXPECT_TRUE(same_bytes(t, pattern(DType::F16, {4, 9}, 100 + root))) << "root " << root;
    std::string text = w->rank() == root ? "from rank " + std::to_string(root) : "";
    w->broadcast_string(text, root);
    EXPECT_EQ(text, "from rank " + std::to_string(root));
  }
}

TEST(ProcessGroupMpi, EmptyTensorAndStrings) {
  auto w = world();
  if (w->rank() == 0) {
    w->send_tensor(Tensor::empty({0, 4}, DType::F32), 1, 12);
    w->send_string("", 1, 12);
    w->send_string("model.layers.3", 1, 12);
  } else if (w->rank() == 1) {
    Tensor t = w->recv_tensor(0, 12);
    EXPECT_EQ(t.shape(), (Shape{0, 4}));
    EXPECT_EQ(w->recv_string(0, 12), "");
    EXPECT_EQ(w->recv_string(0, 12), "model.layers.3");
  }
  w->barrier();
}

TEST(ProcessGroupMpi, AWaitForNothingEndsWithAnErrorNamingThePeer) {
  auto w = world();
  if (w->rank() == 1) {
    std::vector<std::byte> buf(8);
    try {
      w->recv(buf, 0, 99, std::chrono::milliseconds(300));
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("FERRY_PG_TIMEOUT"), std::string::npos) << e.what();
    }
  }
  w->barrier();
}

TEST(ProcessGroupMpi, AMessageOfAnotherSizeIsAnError) {
  auto w = world();
  if (w->rank() == 0) {
    const std::vector<std::byte> four(4);
    w->send(four, 1, 13);
  } else if (w->rank() == 1) {
    std::vector<std::byte> eight(8);
    EXPECT_THROW(w->recv(eight, 0, 13), Error);
  }
  w->barrier();
}

TEST(ProcessGroupMpi, SelfAndOutsideRanksAreErrors) {
  auto w = world();
  const std::vector<std::byte> b(1);
  EXPECT_THROW(w->send(b, w->rank(), 1), Error);
  EXPECT_THROW(w->send(b, w->size(), 1), Error);
  EXPECT_THROW(w->send(b, -1, 1), Error);
}

}  // namespace
}  // namespace ferry
