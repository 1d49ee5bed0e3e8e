// ProcessGroup over MPI (process_group.h). Every wait is a nonblocking operation polled until done: a rank waiting
// for its peer sleeps instead of spinning (ranks share the machine's cores with compute threads), and a wait can end
// with an error naming the peer after the group's timeout instead of hanging. Messages larger than MPI's int count
// go in 1 GiB pieces.
#include "process_group_mpi.h"

#include <cstdlib>

#ifdef FERRY_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only (Open MPI's C++ bindings need their own library)
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/error.h"
#endif

namespace ferry::detail {

#ifndef FERRY_HAVE_MPI

std::shared_ptr<ProcessGroup> mpi_world_if_launched() { return nullptr; }
bool mpi_built() noexcept { return false; }

#else

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kPiece = ProcessGroup::kMessagePiece;

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

class MpiGroup final : public ProcessGroup {
 public:
  MpiGroup() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::string backend() const override { return "mpi"; }

  void send(std::span<const std::byte> bytes, int to, int tag) override {
    check_peer(to, "send to");
    for (MPI_Request& req : isend_pieces(bytes, to, tag)) wait(req, "send to", to, timeout());
  }

  void send_async(std::shared_ptr<const void> keep, std::span<const std::byte> bytes, int to, int tag) override {
    check_peer(to, "send to");
    Pending p{std::move(keep), isend_pieces(bytes, to, tag), to};
    std::lock_guard lock(mutex_);
    pending_.push_back(std::move(p));
  }

  void flush() override {
    if (!poll(timeout(), [&] { return deliver(); }))
      throw Error("rank " + std::to_string(rank_) + " waited " + std::to_string(timeout().count() / 1000) +
                      " s for rank " + std::to_string(first_pending_peer()) + " to take what it sent",
                  "process group", "is that rank stuck or dead? (FERRY_PG_TIMEOUT sets the wait, in seconds)");
  }

  void recv(std::span<std::byte> bytes, int from, int tag, std::chrono::milliseconds timeout) override {
    check_peer(from, "receive from");
    for (std::size_t at = 0; at < bytes.size() || (at == 0 && bytes.empty()); at += kPiece) {
      const int n = static_cast<int>(std::min(kPiece, bytes.size() - at));
      MPI_Request req;
      check(locked([&] { return MPI_Irecv(bytes.data() + at, n, MPI_BYTE, from, tag, MPI_COMM_WORLD, &req); }),
            "receive from", from);
      MPI_Status status;
      wait(req, "receive from", from, at == 0 ? timeout : this->timeout(), &status);
      int got = 0;
      MPI_Get_count(&status, MPI_BYTE, &got);
      if (got != n)
        throw Error("rank " + std::to_string(rank_) + " expected " + std::to_string(n) + " bytes from rank " +
                        std::to_string(from) + " and got " + std::to_string(got),
                    "process group", "every rank must run the same ferry version and the same command");
      if (bytes.empty()) break;
    }
  }

  std::optional<std::size_t> peek(int from, int tag) override {
    check_peer(from, "receive from");
    MPI_Status st;
    const bool found = poll(timeout(), [&] {
      int probed = 0;
      check(locked([&] { return MPI_Iprobe(from, tag, MPI_COMM_WORLD, &probed, &st); }), "receive from", from);
      deliver();
      return probed != 0;
    });
    if (!found) throw nothing_came("receive from", from, timeout());
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    return static_cast<std::size_t>(count);
  }

  void broadcast(std::span<std::byte> bytes, int root) override {
    if (root < 0 || root >= size_)
      throw Error("broadcast from rank " + std::to_string(root) + " in a group of " + std::to_string(size_) + " ranks",
                  "process group");
    for (std::size_t at = 0; at < bytes.size(); at += kPiece) {
      const int n = static_cast<int>(std::min(kPiece, bytes.size() - at));
      MPI_Request req;
      check(locked([&] { return MPI_Ibcast(bytes.data() + at, n, MPI_BYTE, root, MPI_COMM_WORLD, &req); }),
            "broadcast with", root);
      wait(req, "broadcast with", root, timeout());
    }
  }

  void barrier() override {
    MPI_Request req;
    check(locked([&] { return MPI_Ibarrier(MPI_COMM_WORLD, &req); }), "meet", -1);
    wait(req, "meet", -1, timeout());
  }

  [[noreturn]] void abort(const std::string& message, int code) override {
    std::fprintf(stderr, "ferry (rank %d of %d): %s\n", rank_, size_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  static std::string peer_name(int peer) { return peer < 0 ? "every rank" : "rank " + std::to_string(peer); }

  void check(int rc, const char* what, int peer) const {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw Error("rank " + std::to_string(rank_) + " could not " + what + " " + peer_name(peer) + ": " +
                    std::string(text, static_cast<std::size_t>(len)),
                "process group", "is every rank alive? mpirun names a rank that died");
  }

  // Polls `req` until done, sleeping between polls (from a few microseconds up to a millisecond); past `timeout`
  // (zero: none) cancels it and throws.
  void wait(MPI_Request& req, const char* what, int peer, std::chrono::milliseconds timeout,
            MPI_Status* status = nullptr) const {
    MPI_Status st;
    const bool done = poll(timeout, [&] {
      int test = 0;
      check(locked([&] { return MPI_Test(&req, &test, &st); }), what, peer);
      deliver();
      return test != 0;
    });
    if (!done) {
      locked([&] { return MPI_Cancel(&req); });
      throw nothing_came(what, peer, timeout);
    }
    if (status != nullptr) *status = st;
  }

  // Calls `ready` until it returns true, spinning at first and then sleeping between calls (from a few microseconds
  // up to a millisecond); false once `timeout` (zero: none) has passed.
  template <class Ready>
  static bool poll(std::chrono::milliseconds timeout, Ready&& ready) {
    const auto start = Clock::now();
    auto nap = std::chrono::microseconds(0);
    for (int polls = 0;; ++polls) {
      if (ready()) return true;
      if (polls > 64) {
        nap = std::min<std::chrono::microseconds>(std::chrono::milliseconds(1), nap + std::chrono::microseconds(20));
        std::this_thread::sleep_for(nap);
      }
      if (timeout.count() > 0 && Clock::now() - start > timeout) return false;
    }
  }

  Error nothing_came(const char* what, int peer, std::chrono::milliseconds timeout) const {
    return Error("rank " + std::to_string(rank_) + " waited " + std::to_string(timeout.count() / 1000) + " s to " +
                     what + " " + peer_name(peer) + " and nothing came",
                 "process group",
                 "is " + peer_name(peer) + " stuck or dead? (FERRY_PG_TIMEOUT sets the wait, in seconds)");
  }

  // MPI_Isend of `bytes` in pieces of at most kPiece (one empty message for no bytes).
  std::vector<MPI_Request> isend_pieces(std::span<const std::byte> bytes, int to, int tag) const {
    std::vector<MPI_Request> requests;
    for (std::size_t at = 0; at < bytes.size() || (at == 0 && bytes.empty()); at += kPiece) {
      const int n = static_cast<int>(std::min(kPiece, bytes.size() - at));
      MPI_Request req;
      check(locked([&] { return MPI_Isend(bytes.data() + at, n, MPI_BYTE, to, tag, MPI_COMM_WORLD, &req); }), "send to",
            to);
      requests.push_back(req);
      if (bytes.empty()) break;
    }
    return requests;
  }

  // A send_async message: its requests (one per piece) and the owner of its bytes.
  struct Pending {
    std::shared_ptr<const void> keep;
    std::vector<MPI_Request> requests;
    int to = -1;
  };

  // Completes the send_async messages delivered by now, dropping their bytes; true when none is left.
  bool deliver() const {
    std::lock_guard lock(mutex_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      int done = 0;
      const int rc = MPI_Testall(static_cast<int>(it->requests.size()), it->requests.data(), &done,
                                 MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) {
        const int to = it->to;
        pending_.erase(it);
        check(rc, "send to", to);  // throws
        return false;
      }
      it = done ? pending_.erase(it) : std::next(it);
    }
    return pending_.empty();
  }

  int first_pending_peer() const {
    std::lock_guard lock(mutex_);
    return pending_.empty() ? -1 : pending_.front().to;
  }

  // MPI_THREAD_SERIALIZED: one MPI call at a time, each under the lock — never a whole wait, so that the threads of a
  // pipeline's micro-batches each wait for their own message while another sends or computes.
  template <class Call>
  int locked(Call&& call) const {
    std::lock_guard lock(mutex_);
    return call();
  }

  int rank_ = 0, size_ = 1;
  mutable std::mutex mutex_;
  mutable std::list<Pending> pending_;  // under mutex_
};

}  // namespace

std::shared_ptr<ProcessGroup> mpi_world_if_launched() {
  if (!launched_by_mpi()) return nullptr;
  return std::make_shared<MpiGroup>();
}

bool mpi_built() noexcept { return true; }

#endif

}  // namespace ferry::detail
