// ProcessGroup without a launcher: one rank (process_group.h). The several-rank behaviour is tests/mpi.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
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

// Rank 1 of 2 whose messages from rank 0 are given: recv takes the next one whole; peek tells its size.
class GivenMessages final : public ProcessGroup {
 public:
  explicit GivenMessages(std::deque<std::vector<std::byte>> messages) : messages_(std::move(messages)) {}
  int rank() const noexcept override { return 1; }
  int size() const noexcept override { return 2; }
  std::string backend() const override { return "given"; }
  void send(std::span<const std::byte>, int, int) override {}
  void recv(std::span<std::byte> bytes, int, int, std::chrono::milliseconds) override {
    if (messages_.empty()) throw Error("nothing came", "test");
    if (messages_.front().size() != bytes.size()) throw Error("a message of another size", "test");
    std::memcpy(bytes.data(), messages_.front().data(), bytes.size());
    messages_.pop_front();
  }
  std::optional<std::size_t> peek(int, int) override {
    ++peeks;
    if (messages_.empty()) throw Error("nothing came", "test");
    return messages_.front().size();
  }
  void broadcast(std::span<std::byte>, int) override {}
  void barrier() override {}
  [[noreturn]] void abort(const std::string&, int) override { std::abort(); }
  int peeks = 0;

 private:
  std::deque<std::vector<std::byte>> messages_;
};

std::vector<std::byte> header(int64_t dtype, std::vector<int64_t> shape) {
  std::vector<int64_t> words = {dtype, static_cast<int64_t>(shape.size())};
  shape.resize(8, 0);
  words.insert(words.end(), shape.begin(), shape.end());
  std::vector<std::byte> out(words.size() * 8);
  std::memcpy(out.data(), words.data(), out.size());
  return out;
}

// A tensor's header is checked before anything is allocated: against the dtypes ferry knows, dimensions that are
// not negative and multiply to at most 2^50 elements, and the size of the message that follows.
TEST(ProcessGroup, ATensorHeaderIsCheckedBeforeAllocating) {
  const int64_t f32 = static_cast<int64_t>(DType::F32);
  auto received = [](std::deque<std::vector<std::byte>> m) {
    GivenMessages g(std::move(m));
    return g.recv_tensor(0, 0);
  };
  auto error_of = [&](std::deque<std::vector<std::byte>> m) -> std::string {
    try {
      received(std::move(m));
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  std::vector<std::byte> six(6 * 4);
  const Tensor ok = received({header(f32, {2, 3}), six});
  EXPECT_EQ(ok.shape(), (Shape{2, 3}));
  EXPECT_EQ(received({header(f32, {0, 3})}).numel(), 0);  // no bytes follow, nothing peeked
  EXPECT_NE(error_of({header(f32, {1 << 20, 1 << 20}), six})
                .find("header for 4398046511104 bytes and then a message "
                      "of 24"),
            std::string::npos);
  EXPECT_NE(error_of({header(f32, {int64_t{1} << 40, int64_t{1} << 40}), six}).find("more than 2^50"),
            std::string::npos);
  EXPECT_NE(error_of({header(f32, {2, -3}), six}).find("negative dimension"), std::string::npos);
  EXPECT_NE(error_of({header(200, {2, 3}), six}).find("malformed tensor header"), std::string::npos);
  EXPECT_NE(error_of({header(f32, {2, 3}), {}}).find("header for 24 bytes and then a message of 0"), std::string::npos);
}

}  // namespace
}  // namespace ferry
