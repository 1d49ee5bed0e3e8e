// Rows of an offloaded table (WeightsMap::get_rows, see include/ferry/io/offload.h): what an embedding lookup reads.
#include <cstring>

#include "ferry/core/error.h"
#include "ferry/io/offload.h"

namespace ferry::io {
namespace {

// `rows` must be ascending, distinct and within a first dimension of `n`.
void check_rows(const Shape& shape, std::span<const int64_t> rows, const std::string& key) {
  if (shape.empty()) throw Error("a 0-d tensor has no rows to read", key);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= shape[0])
      throw Error("row " + std::to_string(rows[i]) + " is outside the tensor's " + std::to_string(shape[0]) + " rows",
                  key);
    if (i > 0 && rows[i] <= rows[i - 1]) throw Error("rows to read must be ascending and distinct", key);
  }
}

Shape rows_shape(Shape shape, std::size_t n) {
  shape[0] = static_cast<int64_t>(n);
  return shape;
}

}  // namespace

Tensor gather_rows(const Tensor& t, std::span<const int64_t> rows, const std::string& key) {
  check_rows(t.shape(), rows, key);
  if (!t.device().is_cpu()) return gather_rows(t.to(Device::cpu()), rows, key).to(t.device());
  Tensor out = Tensor::empty(rows_shape(t.shape(), rows.size()), t.dtype());
  if (rows.empty() || t.numel() == 0) return out;
  const std::size_t row_bytes = t.nbytes() / static_cast<std::size_t>(t.size(0));
  const auto* src = static_cast<const char*>(t.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for (std::size_t i = 0; i < rows.size(); ++i)
    std::memcpy(dst + i * row_bytes, src + static_cast<std::size_t>(rows[i]) * row_bytes, row_bytes);
  return out;
}

Tensor WeightsMap::get_rows(const std::string& key, std::span<const int64_t> rows) const {
  return gather_rows(get(key), rows, key);
}

Tensor OffloadedWeightsLoader::get_rows(const std::string& key, std::span<const int64_t> rows) const {
  auto it = index_.find(key);
  if (!reader_ || state_dict_.contains(key) || it == index_.end()) return WeightsMap::get_rows(key, rows);
  const OffloadEntry& info = it->second;
  const DiskTensor d = locate(key, info);
  check_rows(d.shape, rows, key);
  Tensor out = Tensor::empty(rows_shape(d.shape, rows.size()), d.dtype);
  if (!rows.empty() && out.numel() > 0) {
    const std::size_t row_bytes = d.range.length / static_cast<std::size_t>(d.shape[0]);
    if (row_bytes * static_cast<std::size_t>(d.shape[0]) != d.range.length)
      throw Error("the tensor's " + std::to_string(d.range.length) + " bytes do not split into " +
                      std::to_string(d.shape[0]) + " rows",
                  key);
    reader_->read_rows(d.range, row_bytes, rows, out.raw_data());
  }
  if (info.in_safetensors() && info.dtype && *info.dtype != d.dtype) out = out.to(*info.dtype);
  return out.to(device_);
}

}  // namespace ferry::io
