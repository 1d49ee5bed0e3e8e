// Embedding: a [V, D] table (PyTorch init N(0, 1)) looked up by ops::embedding.
#include "ferry/nn/embedding.h"

#include "ferry/core/error.h"
#include "ferry/ops/gather.h"

namespace ferry::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, DType dtype)
    : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  if (num_embeddings < 0 || embedding_dim < 0)
    throw Error("negative size: Embedding(" + std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim) +
                ")");
  register_parameter("weight", {num_embeddings, embedding_dim}, dtype, TensorInit::normal(0.0, 1.0));
}

Value Embedding::forward(const Args& args) {
  const Tensor* ids = args.tensor_arg(0, "input");
  if (ids == nullptr) ids = args.tensor_arg(0, "input_ids");
  if (ids == nullptr) throw Error("forward needs an id tensor (positional 0, \"input\" or \"input_ids\")", type_name());
  return ops::embedding(weight(), *ids);
}

Value* Embedding::row_lookup_ids(Args& args) const noexcept {
  Value* v = !args.args.empty() ? &args.args[0] : args.kwargs.find("input");
  if (v == nullptr) v = args.kwargs.find("input_ids");
  return v != nullptr && v->is_tensor() ? v : nullptr;
}

}  // namespace ferry::nn
