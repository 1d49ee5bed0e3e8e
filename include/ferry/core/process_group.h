// ProcessGroup: the ranks of one job, which send each other bytes and tensors — torch.distributed's process group,
// as Accelerate's load_checkpoint_in_model(broadcast_from_rank0=True) and a pipeline over machines use it.
//
//   std::shared_ptr<ProcessGroup> world = world_process_group();  // MPI's world under mpirun, else one rank
//   if (world->rank() == 0) world->send_tensor(hidden, 1, kTag);
//   else Tensor hidden = world->recv_tensor(0, kTag);
//
// Backed by MPI (Open MPI; `mpirun -np 2 ferry ...`) when ferry is built with it and the process was started by an
// MPI launcher; otherwise a group of one rank, so a build or a run without MPI works as before. Nothing above
// big_modeling calls it (DESIGN.md "Process groups").
//
// Faults: a wait that sees nothing from its peer for timeout() throws ferry::Error naming both ranks; a rank that
// dies is reported by the launcher (mpirun ends every rank and names the one that died). abort() ends every rank.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "ferry/core/tensor.h"

namespace ferry {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  /// This process's rank (0 .. size()-1) and the number of ranks. torch.distributed: get_rank / get_world_size
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  /// "mpi", or "local" for a group of one rank.
  virtual std::string backend() const = 0;

  /// Sends `bytes` to rank `to` under `tag` (a message of `tag` from one rank to another arrives in order); returns
  /// when the buffer may be reused. Throws ferry::Error for a rank outside the group, itself, or after timeout().
  virtual void send(std::span<const std::byte> bytes, int to, int tag) = 0;
  /// Sends `bytes` without waiting for `to` to take them: returns at once, and the group holds `keep` (the owner of
  /// the bytes) until the message is delivered — later calls of the group's own waits deliver it, flush() waits for
  /// every one. Ordered with send()s of the same tag. The one-rank group and groups without it send at once.
  virtual void send_async(std::shared_ptr<const void> keep, std::span<const std::byte> bytes, int to, int tag);
  /// Returns when every send_async message has been delivered. Throws ferry::Error after timeout().
  virtual void flush() {}
  /// Receives exactly bytes.size() bytes from rank `from` under `tag`. `timeout` (default timeout()) bounds the wait;
  /// zero waits as long as it takes (a rank idle between requests). Throws ferry::Error when the message is of
  /// another size, or nothing came in time.
  virtual void recv(std::span<std::byte> bytes, int from, int tag, std::chrono::milliseconds timeout) = 0;
  void recv(std::span<std::byte> bytes, int from, int tag) { recv(bytes, from, tag, timeout()); }
  /// Bytes of the next message from `from` under `tag`, once it has come (timeout() bounds the wait): recv_tensor
  /// checks a tensor's header against it before allocating. nullopt: this group cannot tell.
  virtual std::optional<std::size_t> peek(int from, int tag) {
    (void)from;
    (void)tag;
    return std::nullopt;
  }
  /// Messages longer than this travel as several of at most this many bytes each.
  static constexpr std::size_t kMessagePiece = std::size_t{1} << 30;
  /// `root`'s bytes into every rank's `bytes` (the same size on every rank). torch.distributed: broadcast
  virtual void broadcast(std::span<std::byte> bytes, int root) = 0;
  /// Returns when every rank has called it.
  virtual void barrier() = 0;
  /// Prints `message` (naming this rank) and ends every rank of the job with `code`. Does not return.
  [[noreturn]] virtual void abort(const std::string& message, int code = 1) = 0;

  /// A tensor's dtype, shape and bytes (a host tensor, any dtype, quantized ones too); recv_tensor returns a new cpu
  /// tensor. broadcast_tensor: `tensor` on root; every other rank gets root's in a new cpu tensor (its argument is
  /// replaced).
  void send_tensor(const Tensor& tensor, int to, int tag);
  /// send_tensor without waiting (send_async): the group keeps `tensor` — which must not change — until delivered.
  void send_tensor_async(const Tensor& tensor, int to, int tag);
  Tensor recv_tensor(int from, int tag, std::chrono::milliseconds timeout);
  Tensor recv_tensor(int from, int tag) { return recv_tensor(from, tag, timeout()); }
  void broadcast_tensor(Tensor& tensor, int root);
  /// Text (names, JSON), by length then bytes.
  void send_string(const std::string& text, int to, int tag);
  std::string recv_string(int from, int tag, std::chrono::milliseconds timeout);
  std::string recv_string(int from, int tag) { return recv_string(from, tag, timeout()); }
  void broadcast_string(std::string& text, int root);

  /// How long a wait for another rank may last before it is an error: FERRY_PG_TIMEOUT (seconds) when set, else 300 s.
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) noexcept { timeout_ = timeout; }

 protected:
  ProcessGroup();
  /// Throws ferry::Error for a peer rank outside the group or equal to this rank.
  void check_peer(int peer, const char* what) const;

 private:
  std::chrono::milliseconds timeout_;
};

/// The job's ranks: MPI's world when ferry is built with MPI and this process was started by mpirun / mpiexec (MPI
/// is initialized on the first call and finalized at exit), else single_process_group(). The same object each call.
std::shared_ptr<ProcessGroup> world_process_group();
/// A group of this process alone (rank 0 of 1): broadcast and barrier return at once; send and recv throw (no peer).
std::shared_ptr<ProcessGroup> single_process_group();
/// Whether this build can run several ranks (ferry was built with MPI).
bool process_groups_available() noexcept;

}  // namespace ferry
