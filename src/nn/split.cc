// split_last_dim: copies the column blocks of a row-major tensor into separate tensors (torch.split(dim=-1)).
#include "ferry/nn/split.h"

#include <cstring>
#include <numeric>
#include <string>

#include "ferry/core/backend.h"
#include "ferry/core/error.h"

namespace ferry::nn {

std::vector<Tensor> split_last_dim(const Tensor& x, const std::vector<int64_t>& sizes) {
  if (x.dim() < 1) throw Error("cannot split a 0-d tensor", "split_last_dim");
  const int64_t width = x.size(-1);
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  if (total != width)
    throw Error("sizes add up to " + std::to_string(total) + " but the last dimension is " + std::to_string(width),
                "split_last_dim");
  const bool host = x.device().is_host_addressable();
  std::shared_ptr<Backend> backend = host ? nullptr : backend_for(x.device());  // a GPU copies the blocks itself
  const int64_t rows = width == 0 ? 0 : x.numel() / width;
  const std::size_t elem = dtype_size(x.dtype());
  const auto* src = static_cast<const unsigned char*>(x.raw_data());
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t offset = 0;
  for (int64_t n : sizes) {
    if (n < 0) throw Error("negative split size " + std::to_string(n), "split_last_dim");
    Shape shape = x.shape();
    shape.back() = n;
    Tensor piece = Tensor::empty(shape, x.dtype(), x.device());
    auto* dst = static_cast<unsigned char*>(piece.raw_data());
    if (backend && rows > 0)
      backend->copy_rows(dst, static_cast<std::size_t>(n) * elem, src + offset * elem, static_cast<std::size_t>(width) * elem,
                         static_cast<std::size_t>(n) * elem, static_cast<std::size_t>(rows), x.device());
    else
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(dst + r * n * elem, src + (r * width + offset) * elem, static_cast<std::size_t>(n) * elem);
    offset += n;
    out.push_back(std::move(piece));
  }
  return out;
}

std::vector<Tensor> split_fused_qkv(const Tensor& qkv, int64_t heads, int64_t head_dim, bool blocks) {
  const int64_t c = heads * head_dim;
  if (qkv.dim() != 2 || qkv.size(1) != 3 * c)
    throw Error("expects [T, 3 · " + std::to_string(heads) + " heads · " + std::to_string(head_dim) + "], got " +
                    shape_str(qkv.shape()),
                "split_fused_qkv");
  const int64_t t = qkv.size(0);
  std::vector<Tensor> parts = blocks ? split_last_dim(qkv, {c, c, c})
                                     : split_last_dim(qkv.reshape({t * heads, 3 * head_dim}),
                                                      {head_dim, head_dim, head_dim});
  for (Tensor& p : parts) p = p.reshape({t, heads, head_dim});
  return parts;
}

}  // namespace ferry::nn
