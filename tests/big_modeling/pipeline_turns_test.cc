// PipelineTurns and MicroBatchScope (big_modeling/pipeline.h): the micro-batches of one forward on rank 0 take turns
// in the order their tickets were taken, one at a time, and the time turns were held is counted.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "ferry/big_modeling/pipeline.h"
#include "ferry/core/error.h"

namespace ferry {
namespace {

TEST(PipelineTurns, ServedInTicketOrderOneAtATime) {
  PipelineTurns turns;
  constexpr int kThreads = 6;
  std::vector<int64_t> tickets;
  for (int i = 0; i < kThreads; ++i) tickets.push_back(turns.take());
  std::mutex m;
  std::vector<int> order;
  std::atomic<int> inside{0}, most{0};
  std::vector<std::thread> threads;
  // Started in reverse: the tickets, not the start order, decide.
  for (int i = kThreads - 1; i >= 0; --i)
    threads.emplace_back([&, i] {
      turns.wait(tickets[static_cast<std::size_t>(i)]);
      const int now = ++inside;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      {
        std::lock_guard lock(m);
        order.push_back(i);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      --inside;
      turns.release();
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(most.load(), 1);
  EXPECT_GE(turns.busy_seconds(), 6 * 0.002);
}

TEST(PipelineTurns, AThreadThatGivesItsTurnUpQueuesBehindTheOthers) {
  // A holds the first turn, gives it up (as a wait for another rank does), and takes a new ticket: B, which was
  // queued, runs before A's second turn.
  PipelineTurns turns;
  const int64_t a = turns.take(), b = turns.take();
  std::vector<char> order;
  std::mutex m;
  auto mark = [&](char c) {
    std::lock_guard lock(m);
    order.push_back(c);
  };
  std::thread tb([&] {
    turns.wait(b);
    mark('B');
    turns.release();
  });
  turns.wait(a);
  mark('a');
  turns.release();
  turns.wait(turns.take());
  mark('A');
  turns.release();
  tb.join();
  EXPECT_EQ(order, (std::vector<char>{'a', 'B', 'A'}));
}

TEST(MicroBatchScope, SlotsOutsideTheTagRangeAreErrors) {
  EXPECT_THROW(MicroBatchScope(-1, nullptr), Error);
  EXPECT_THROW(MicroBatchScope(kMaxMicroBatches, nullptr), Error);
  MicroBatchScope ok(kMaxMicroBatches - 1, nullptr);
}

}  // namespace
}  // namespace ferry
