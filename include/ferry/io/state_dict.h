// StateDict: named tensors in a fixed order — what a checkpoint file holds and what a model's state_dict() returns.
//
// Insertion order is kept (it is the file's order for safetensors and the pickle's order for .bin), and lookup by
// name is O(1). Names are the Hugging Face keys ("model.layers.0.self_attn.q_proj.weight"). Tensors are handles:
// copying a StateDict copies handles, never bytes, so tensors that view an mmap'd file keep it mapped.
// Not synchronised: share a StateDict across threads read-only.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ferry/core/tensor.h"

namespace ferry::io {

class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;
  using const_iterator = std::vector<Item>::const_iterator;

  StateDict() = default;

  /// Adds `name` at the end. Throws ferry::Error when the name is already present (a checkpoint that names a
  /// tensor twice is malformed; use set() to replace on purpose).
  void insert(std::string name, Tensor tensor);
  /// Replaces the tensor of `name` in place (keeping its position), or adds it at the end.
  void set(std::string name, Tensor tensor);
  /// Removes `name`; returns false when absent. O(N): it renumbers the positions after it.
  bool erase(std::string_view name);

  bool contains(std::string_view name) const { return find(name) != nullptr; }
  /// nullptr when absent.
  const Tensor* find(std::string_view name) const;
  /// Throws ferry::Error naming the key (and `where`, e.g. the file) when absent.
  const Tensor& at(std::string_view name) const;

  std::size_t size() const noexcept { return items_.size(); }
  bool empty() const noexcept { return items_.empty(); }
  const_iterator begin() const noexcept { return items_.begin(); }
  const_iterator end() const noexcept { return items_.end(); }
  const std::vector<Item>& items() const noexcept { return items_; }
  /// Names in order.
  std::vector<std::string> keys() const;
  /// Sum of nbytes() over all tensors (tied tensors count once per name).
  std::size_t total_bytes() const noexcept;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::vector<Item> items_;
  std::unordered_map<std::string, std::size_t, Hash, std::equal_to<>> index_;
};

}  // namespace ferry::io
