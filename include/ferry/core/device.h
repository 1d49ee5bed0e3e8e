// Device: where a tensor's bytes live.
//
//   cpu       host memory
//   cuda:N    GPU N (a bare integer N means cuda:N, as in Accelerate's device maps)
//   meta      no bytes at all: shape and dtype only (init_empty_weights, offloaded parameters between calls)
//   disk      a placement in device maps only (weights served from an offload folder or checkpoint)
//   virt:N    a *virtual* accelerator for tests: host memory with its own identity, capacity and accounting.
//             Exists only after enable_virtual_devices() or FERRY_VIRTUAL_DEVICES=N[:capacity] — never silently.
//   rankR:...  one of the above on rank R of a process group (rank1:cpu, rank1:cuda:0, rank1:disk): a pipeline's device
//             maps (big_modeling/pipeline.h). Plain names mean rank 0.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace ferry {

struct Device {
  enum class Kind : uint8_t { CPU, CUDA, Meta, Disk, Virtual };

  Kind kind = Kind::CPU;
  int index = 0;  // meaningful for CUDA and Virtual only; 0 otherwise
  int rank = 0;   // the process-group rank that holds it (0 outside pipelines)

  constexpr Device() = default;
  constexpr Device(Kind k, int i = 0, int r = 0) : kind(k), index(i), rank(r) {}

  static constexpr Device cpu() { return {Kind::CPU}; }
  static constexpr Device meta() { return {Kind::Meta}; }
  static constexpr Device disk() { return {Kind::Disk}; }
  static constexpr Device cuda(int i = 0) { return {Kind::CUDA, i}; }
  static constexpr Device virt(int i = 0) { return {Kind::Virtual, i}; }

  /// Parses "cpu", "meta", "disk", "cuda", "cuda:1", "1" (= cuda:1), "virt:0", each optionally after "rankR:"
  /// ("rank1:cpu"). Throws ferry::Error otherwise.
  static Device parse(std::string_view s);

  bool is_cpu() const { return kind == Kind::CPU; }
  bool is_meta() const { return kind == Kind::Meta; }
  bool is_disk() const { return kind == Kind::Disk; }
  bool is_cuda() const { return kind == Kind::CUDA; }
  bool is_virtual() const { return kind == Kind::Virtual; }
  /// An accelerator: cuda:N or virt:N (what Accelerate calls a GPU when planning).
  bool is_accelerator() const { return is_cuda() || is_virtual(); }
  /// Bytes are host-addressable (cpu, and virtual devices, which are host memory underneath).
  bool is_host_addressable() const { return is_cpu() || is_virtual(); }

  /// The same device on rank r; the same device on rank 0 (local()).
  constexpr Device on_rank(int r) const { return {kind, index, r}; }
  constexpr Device local() const { return {kind, index, 0}; }
  /// "cuda:1", "rank1:cpu" (no prefix on rank 0).
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
  friend auto operator<=>(const Device&, const Device&) = default;
};

std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace ferry

template <>
struct std::hash<ferry::Device> {
  std::size_t operator()(const ferry::Device& d) const noexcept {
    return (static_cast<std::size_t>(d.rank) << 32) ^ (static_cast<std::size_t>(d.kind) << 16) ^
           static_cast<std::size_t>(d.index);
  }
};
