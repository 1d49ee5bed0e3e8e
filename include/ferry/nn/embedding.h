// Embedding (torch.nn.Embedding): rows of a [V, D] table picked by integer ids.
#pragma once

#include <cstdint>
#include <string>

#include "ferry/nn/module.h"

namespace ferry::nn {

/// Parameter: weight [num_embeddings, embedding_dim], init N(0, 1) like PyTorch. Forward: args[0] (or
/// "input_ids") = i64 ids [...] -> f32 [..., D]; an id outside [0, V) throws ferry::Error.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, DType dtype = DType::F32);

  std::string type_name() const override { return "Embedding"; }
  Value forward(const Args& args) override;
  using Module::operator();
  /// "weight": a call reads only the rows its ids pick (an offloaded table is read by the row), unless
  /// read_whole_table() was called.
  std::string_view row_lookup_parameter() const noexcept override { return by_row_ ? "weight" : ""; }
  /// For a table whose calls pick most of its rows (T5's relative-position buckets): offloaded, it is read whole,
  /// and plans count it as read whole.
  void read_whole_table() noexcept { by_row_ = false; }
  /// The ids: positional 0, "input" or "input_ids" (as forward takes them).
  Value* row_lookup_ids(Args& args) const noexcept override;

  int64_t num_embeddings() const noexcept { return num_embeddings_; }
  int64_t embedding_dim() const noexcept { return embedding_dim_; }
  const Tensor& weight() const { return parameter("weight"); }

 private:
  int64_t num_embeddings_, embedding_dim_;
  bool by_row_ = true;
};

}  // namespace ferry::nn
