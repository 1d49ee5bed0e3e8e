// ProcessGroup's typed messages, the one-rank group and the choice of the world (process_group.h). The MPI group is
// process_group_mpi.cc.
#include "ferry/core/process_group.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <string_view>
#include <vector>

#include "ferry/core/error.h"
#include "process_group_mpi.h"

namespace ferry {
namespace {

constexpr int64_t kMaxDims = 8;

// A tensor's header: dtype and shape, fixed size so that one message carries it.
struct TensorHeader {
  int64_t dtype = 0;
  int64_t dims = 0;
  int64_t shape[kMaxDims] = {};
};

std::span<const std::byte> bytes_of(const Tensor& t) {
  return {static_cast<const std::byte*>(t.raw_data()), t.nbytes()};
}

TensorHeader header_of(const Tensor& t) {
  if (t.dim() > kMaxDims)
    throw Error("a tensor of " + std::to_string(t.dim()) + " dimensions cannot be sent (at most 8)", "process group");
  TensorHeader h;
  h.dtype = static_cast<int64_t>(t.dtype());
  h.dims = t.dim();
  for (int64_t i = 0; i < t.dim(); ++i) h.shape[i] = t.size(i);
  return h;
}

Error bad_message(int from, const std::string& what) {
  return Error("rank " + std::to_string(from) + " sent " + what, "process group",
               "every rank must run the same ferry version");
}

// The tensor a header announces, on the meta device (its size, nothing allocated); throws for a malformed header.
Tensor announced(const TensorHeader& h, int from) {
  const bool known_dtype = std::any_of(std::begin(kAllDTypes), std::end(kAllDTypes),
                                       [&](DType d) { return static_cast<int64_t>(d) == h.dtype; }) ||
                           std::any_of(std::begin(kQuantizedDTypes), std::end(kQuantizedDTypes),
                                       [&](DType d) { return static_cast<int64_t>(d) == h.dtype; });
  if (h.dims < 0 || h.dims > kMaxDims || !known_dtype) throw bad_message(from, "a malformed tensor header");
  Shape shape(h.shape, h.shape + h.dims);
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) throw bad_message(from, "a negative dimension");
    if (d > 0 && numel > (int64_t{1} << 50) / d) throw bad_message(from, "a tensor of more than 2^50 elements");
    numel *= d;
  }
  try {
    return Tensor::empty(std::move(shape), static_cast<DType>(h.dtype), Device::meta());
  } catch (const Error& e) {  // a quantized shape that is not whole blocks
    throw bad_message(from, std::string("a tensor header that does not describe a tensor: ") + e.what());
  }
}

std::span<std::byte> writable(Tensor& t) { return {static_cast<std::byte*>(t.raw_data()), t.nbytes()}; }

template <class T>
std::span<const std::byte> bytes_of_value(const T& v) {
  return {reinterpret_cast<const std::byte*>(&v), sizeof(T)};
}
template <class T>
std::span<std::byte> bytes_of_value(T& v) {
  return {reinterpret_cast<std::byte*>(&v), sizeof(T)};
}

std::chrono::milliseconds timeout_from_env() {
  if (const char* s = std::getenv("FERRY_PG_TIMEOUT"); s != nullptr && *s != '\0') {
    char* end = nullptr;
    const double seconds = std::strtod(s, &end);
    if (end != s && *end == '\0' && seconds > 0) return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  }
  return std::chrono::seconds(300);
}

class LocalGroup final : public ProcessGroup {
 public:
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  std::string backend() const override { return "local"; }
  void send(std::span<const std::byte>, int to, int) override { check_peer(to, "send to"); }
  void recv(std::span<std::byte>, int from, int, std::chrono::milliseconds) override {
    check_peer(from, "receive from");
  }
  void broadcast(std::span<std::byte>, int root) override {
    if (root != 0)
      throw Error("broadcast from rank " + std::to_string(root) + " in a group of one rank", "process group");
  }
  void barrier() override {}
  [[noreturn]] void abort(const std::string& message, int code) override {
    std::fprintf(stderr, "ferry: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(code);
  }
};

}  // namespace

ProcessGroup::ProcessGroup() : timeout_(timeout_from_env()) {}

void ProcessGroup::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size() || peer == rank())
    throw Error(std::string("rank ") + std::to_string(rank()) + " cannot " + what + " rank " + std::to_string(peer) +
                    " (a group of " + std::to_string(size()) + " rank" + (size() == 1 ? "" : "s") + ")",
                "process group", size() == 1 ? "start every rank with mpirun -np N" : "");
}

void ProcessGroup::send_tensor(const Tensor& tensor, int to, int tag) {
  const TensorHeader h = header_of(tensor);
  send(bytes_of_value(h), to, tag);
  if (tensor.nbytes() > 0) send(bytes_of(tensor), to, tag);
}

void ProcessGroup::send_async(std::shared_ptr<const void> keep, std::span<const std::byte> bytes, int to, int tag) {
  (void)keep;
  send(bytes, to, tag);
}

void ProcessGroup::send_tensor_async(const Tensor& tensor, int to, int tag) {
  auto h = std::make_shared<const TensorHeader>(header_of(tensor));
  send_async(h, bytes_of_value(*h), to, tag);
  if (tensor.nbytes() > 0) {
    auto t = std::make_shared<const Tensor>(tensor);
    send_async(t, bytes_of(*t), to, tag);
  }
}

Tensor ProcessGroup::recv_tensor(int from, int tag, std::chrono::milliseconds timeout) {
  TensorHeader h;
  recv(bytes_of_value(h), from, tag, timeout);
  const Tensor meta = announced(h, from);
  if (meta.nbytes() == 0) return Tensor::empty(meta.shape(), meta.dtype());
  // Allocated only once the message that follows agrees with the header (when the group can tell).
  if (const std::optional<std::size_t> incoming = peek(from, tag);
      incoming && *incoming != std::min(meta.nbytes(), kMessagePiece))
    throw bad_message(from, "a header for " + std::to_string(meta.nbytes()) + " bytes and then a message of " +
                                std::to_string(*incoming));
  Tensor t = Tensor::empty(meta.shape(), meta.dtype());
  recv(writable(t), from, tag, this->timeout());
  return t;
}

void ProcessGroup::broadcast_tensor(Tensor& tensor, int root) {
  TensorHeader h;
  if (rank() == root) h = header_of(tensor);
  broadcast(bytes_of_value(h), root);
  if (rank() != root) {
    const Tensor meta = announced(h, root);
    tensor = Tensor::empty(meta.shape(), meta.dtype());
  }
  if (tensor.nbytes() > 0) broadcast(writable(tensor), root);
}

void ProcessGroup::send_string(const std::string& text, int to, int tag) {
  const auto n = static_cast<int64_t>(text.size());
  send(bytes_of_value(n), to, tag);
  if (n > 0) send({reinterpret_cast<const std::byte*>(text.data()), text.size()}, to, tag);
}

std::string ProcessGroup::recv_string(int from, int tag, std::chrono::milliseconds timeout) {
  int64_t n = 0;
  recv(bytes_of_value(n), from, tag, timeout);
  if (n < 0) throw Error("rank " + std::to_string(from) + " sent a negative length", "process group");
  std::string text(static_cast<std::size_t>(n), '\0');
  if (n > 0) recv({reinterpret_cast<std::byte*>(text.data()), text.size()}, from, tag, this->timeout());
  return text;
}

void ProcessGroup::broadcast_string(std::string& text, int root) {
  auto n = static_cast<int64_t>(text.size());
  broadcast(bytes_of_value(n), root);
  text.resize(static_cast<std::size_t>(n));
  if (n > 0) broadcast({reinterpret_cast<std::byte*>(text.data()), text.size()}, root);
}

std::shared_ptr<ProcessGroup> single_process_group() {
  static const auto group = std::make_shared<LocalGroup>();
  return group;
}

std::shared_ptr<ProcessGroup> world_process_group() {
  static const std::shared_ptr<ProcessGroup> world = [] {
    if (auto mpi = detail::mpi_world_if_launched()) return mpi;
    return single_process_group();
  }();
  return world;
}

bool process_groups_available() noexcept { return detail::mpi_built(); }

}  // namespace ferry
