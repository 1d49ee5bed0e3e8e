// ProcessGroup without a launcher: one rank (process_group.h). The several-rank behaviour is tests/mpi.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/core/process_group.h"

namespace ferry {
namespace {

TEST(ProcessGroup, SingleRankGroup) {
  auto g = single_process_group();
  EXPECT_EQ(g->rank(), 0);
  EXPECT_EQ(g->size(), 1);
  EXPECT_EQ(g->backend(), "local");
  Tensor t = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  g->broadcast_tensor(t, 0);  // root's own tensor stays
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  g->barrier();
  try {
    g->send_tensor(t, 1, 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mpirun -np"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g->recv_tensor(0, 0), Error);
  EXPECT_THROW(g->broadcast_tensor(t, 1), Error);
}

TEST(ProcessGroup, WorldWithoutALauncherIsOneRank) {
  // ctest runs this binary directly (not under mpirun).
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) GTEST_SKIP() << "started by mpirun";
  auto w = world_process_group();
  EXPECT_EQ(w->size(), 1);
  EXPECT_EQ(w->rank(), 0);
  EXPECT_EQ(w.get(), world_process_group().get());
}

}  // namespace
}  // namespace ferry
