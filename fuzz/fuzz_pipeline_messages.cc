// libFuzzer target for what a follower of a pipeline receives from rank 0 (models/pipeline_protocol.h, over
// ProcessGroup's tensor messages, core/process_group.h): the input is a sequence of messages, each a little-endian
// u16 length and that many bytes, played by a group that stands for rank 0. Every message sequence must either decode
// or end in ferry::Error — never a read out of bounds, and never an allocation larger than the message that would
// carry it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "ferry/core/error.h"
#include "ferry/core/process_group.h"
#include "ferry/models/pipeline_protocol.h"

namespace {

using namespace ferry;

// Rank 1 of 2, whose messages from rank 0 are the fuzzer's input.
class ScriptedGroup final : public ProcessGroup {
 public:
  ScriptedGroup(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  int rank() const noexcept override { return 1; }
  int size() const noexcept override { return 2; }
  std::string backend() const override { return "scripted"; }
  void send(std::span<const std::byte>, int to, int) override { check_peer(to, "send to"); }
  void recv(std::span<std::byte> bytes, int from, int, std::chrono::milliseconds) override {
    check_peer(from, "receive from");
    const std::span<const uint8_t> m = next();
    if (m.size() != bytes.size())
      throw Error("expected " + std::to_string(bytes.size()) + " bytes and got " + std::to_string(m.size()),
                  "process group");
    if (!m.empty()) std::memcpy(bytes.data(), m.data(), m.size());
  }
  std::optional<std::size_t> peek(int from, int) override {
    check_peer(from, "receive from");
    const std::size_t at = at_;
    const std::size_t n = next().size();
    at_ = at;
    return n;
  }
  void broadcast(std::span<std::byte>, int) override { throw Error("no broadcast here", "fuzz"); }
  void barrier() override {}
  [[noreturn]] void abort(const std::string&, int) override { std::abort(); }

 private:
  std::span<const uint8_t> next() {
    if (size_ - at_ < 2) throw Error("nothing came", "process group");
    const std::size_t n = data_[at_] | (std::size_t{data_[at_ + 1]} << 8);
    at_ += 2;
    if (size_ - at_ < n) throw Error("a message cut short", "process group");
    const std::span<const uint8_t> m(data_ + at_, n);
    at_ += n;
    return m;
  }

  const uint8_t* data_;
  std::size_t size_, at_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace p = ferry::models::pipeline_protocol;
  ScriptedGroup scripted(data, size);
  ProcessGroup& group = scripted;
  try {
    for (int i = 0; i < 64; ++i) {
      p::Command cmd{};
      group.recv(std::as_writable_bytes(std::span(cmd)), 0, p::kCommandTag);
      switch (p::op_of(cmd)) {
        case p::kStart: (void)p::decode_start(cmd, group.recv_tensor(0, p::kCommandTag)); break;
        case p::kForward: {
          const Tensor table = group.recv_tensor(0, p::kCommandTag);
          const Tensor ids = group.recv_tensor(0, p::kCommandTag);
          const p::Forward f = p::decode_forward(cmd, table, ids, 64);
          if (f.ids.size() != f.tokens.size() || f.micro_batch < 0 || f.micro_batch >= 64) std::abort();
          break;
        }
        case p::kCrop:
          if (p::decode_crop_length(cmd) < 0) std::abort();
          break;
        case p::kDrop:
        case p::kTimes: break;
        case p::kEnd: return 0;
      }
    }
  } catch (const ferry::Error&) {
  }
  return 0;
}
