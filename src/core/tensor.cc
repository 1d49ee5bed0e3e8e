// Tensor handles, factories, moves and views (see include/ferry/core/tensor.h).
#include "ferry/core/tensor.h"

#include <cstring>
#include <limits>

#include "ferry/core/backend.h"
#include "ferry/core/convert.h"
#include "ferry/core/error.h"

namespace ferry {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error("negative dimension in shape " + shape_str(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      throw Error("shape " + shape_str(shape) + " has more elements than fit in 64 bits");
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {

// A quantized tensor's rows are whole blocks: its last dimension is a multiple of the block size.
void check_blocks(const Shape& shape, DType dtype) {
  const int64_t block = dtype_block_size(dtype);
  if (block == 1) return;
  if (shape.empty() || shape.back() % block != 0)
    throw Error("a " + std::string(dtype_name(dtype)) + " tensor needs a last dimension that is a multiple of " +
                    std::to_string(block) + ", got shape " + shape_str(shape),
                "", "quantize only weights whose rows are whole blocks; keep the others in a float dtype");
}

}  // namespace

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, std::size_t byte_offset, Shape shape, DType dtype) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  check_blocks(shape, dtype);
  const auto esize = dtype_size(dtype);
  if (static_cast<uint64_t>(t.numel_) > std::numeric_limits<uint64_t>::max() / esize)
    throw Error("shape " + shape_str(shape) + " is too large");
  const std::size_t need = dtype_nbytes(dtype, t.numel_);
  if (byte_offset > storage->nbytes() || need > storage->nbytes() - byte_offset)
    throw Error("tensor of shape " + shape_str(shape) + " " + std::string(dtype_name(dtype)) + " (" +
                std::to_string(need) + " bytes at offset " + std::to_string(byte_offset) +
                ") does not fit its storage of " + std::to_string(storage->nbytes()) + " bytes");
  t.storage_ = std::move(storage);
  t.offset_ = byte_offset;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  const int64_t n = shape_numel(shape);
  check_blocks(shape, dtype);
  const auto esize = dtype_size(dtype);
  if (static_cast<uint64_t>(n) > std::numeric_limits<uint64_t>::max() / esize)
    throw Error("shape " + shape_str(shape) + " is too large");
  return from_storage(Storage::allocate(device, dtype_nbytes(dtype, n)), 0, std::move(shape), dtype);
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
  Tensor t = empty(std::move(shape), dtype, device);
  if (t.is_meta() || t.nbytes() == 0) return t;
  if (device.is_host_addressable()) {
    std::memset(t.raw_data(), 0, t.nbytes());
  } else {
    std::vector<uint8_t> zero(t.nbytes(), 0);
    copy_bytes(t.raw_data(), device, zero.data(), Device::cpu(), zero.size());
  }
  return t;
}

Tensor Tensor::full(Shape shape, double value, DType dtype, Device device) {
  if (is_quantized(dtype)) return full(std::move(shape), value, DType::F32, Device::cpu()).to(dtype).to(device);
  Tensor host = empty(std::move(shape), dtype, Device::cpu());
  if (host.numel() > 0) {
    convert(&value, DType::F64, host.raw_data(), dtype, 1);
    const auto es = dtype_size(dtype);
    auto* p = static_cast<uint8_t*>(host.raw_data());
    for (int64_t i = 1; i < host.numel(); ++i) std::memcpy(p + i * es, p, es);
  }
  return host.to(device);
}

int64_t Tensor::size(int64_t i) const {
  const int64_t d = dim();
  if (i < -d || i >= d) throw Error("dimension " + std::to_string(i) + " out of range for shape " + shape_str(shape_));
  return shape_[static_cast<std::size_t>(i < 0 ? i + d : i)];
}

void* Tensor::raw_data() const {
  if (!storage_) throw Error("undefined tensor has no data");
  if (storage_->kind() == Storage::Kind::Meta)
    throw Error("meta tensor " + shape_str(shape_) + " has no data", "",
                "load its weights first (load_checkpoint_in_model) or move it with a value");
  if (!device().is_host_addressable() && !device().is_cuda())
    throw Error("tensor on " + device().str() + " is not addressable");
  return static_cast<uint8_t*>(storage_->data()) + offset_;
}

void Tensor::check_dtype(DType want) const {
  if (dtype_ != want)
    throw Error("tensor has dtype " + std::string(dtype_name(dtype_)) + ", accessed as " +
                std::string(dtype_name(want)));
}

void Tensor::check_element_size(std::size_t bytes) const {
  if (dtype_size(dtype_) != bytes)
    throw Error("tensor of dtype " + std::string(dtype_name(dtype_)) + " accessed with elements of " +
                std::to_string(bytes) + " bytes");
}

Tensor Tensor::to(DType dtype, bool saturate) const {
  if (dtype == dtype_ || !defined()) return *this;
  if (is_meta()) return empty(shape_, dtype, Device::meta());
  if (device().is_host_addressable()) {
    Tensor out = empty(shape_, dtype, device());
    convert(raw_data(), dtype_, out.raw_data(), dtype, static_cast<std::size_t>(numel_), saturate);
    return out;
  }
  // Other devices: the backend's conversion kernel where it has one (not for saturating fp8), else the host.
  if (!saturate) {
    Tensor out = empty(shape_, dtype, device());
    if (backend_for(device())->convert(raw_data(), dtype_, out.raw_data(), dtype, static_cast<std::size_t>(numel_),
                                       device()))
      return out;
  }
  return to(Device::cpu()).to(dtype, saturate).to(device());
}

Tensor Tensor::to(Device target) const {
  if (!defined()) return *this;
  const Device from = device();
  if (target == from) return *this;
  if (target.is_disk())
    throw Error("cannot move a tensor to 'disk'", "", "use offload_weight / disk_offload to write weights to disk");
  if (target.is_meta()) return empty(shape_, dtype_, Device::meta());
  if (from.is_meta())
    throw Error("cannot move meta tensor " + shape_str(shape_) + " to " + target.str() + ": it has no data", "",
                "pass a value (set_module_tensor_to_device) or load the checkpoint first");
  Tensor out = empty(shape_, dtype_, target);
  copy_bytes(out.raw_data(), target, raw_data(), from, nbytes());
  return out;
}

Tensor Tensor::to(Device device, DType dtype) const {
  // Convert where the bytes are cheapest to touch: on the host.
  if (device.is_host_addressable() || is_meta()) return to(device).to(dtype);
  return to(dtype).to(device);
}

Tensor Tensor::clone() const {
  if (!defined() || is_meta()) return defined() ? empty(shape_, dtype_, Device::meta()) : *this;
  Tensor out = empty(shape_, dtype_, device());
  copy_bytes(out.raw_data(), device(), raw_data(), device(), nbytes());
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  if (shape_ != src.shape_)
    throw Error("cannot copy a tensor of shape " + shape_str(src.shape_) + " into one of shape " + shape_str(shape_));
  if (read_only()) throw Error("cannot write into a read-only (memory-mapped) tensor");
  if (src.dtype_ == dtype_) {
    copy_bytes(raw_data(), device(), src.raw_data(), src.device(), nbytes());
    return;
  }
  if (src.device() == device() && !device().is_host_addressable() &&
      backend_for(device())->convert(src.raw_data(), src.dtype_, raw_data(), dtype_, static_cast<std::size_t>(numel_),
                                     device()))
    return;
  Tensor converted = src.to(Device::cpu()).to(dtype_);
  copy_bytes(raw_data(), device(), converted.raw_data(), Device::cpu(), nbytes());
}

Tensor Tensor::slice(int64_t start, int64_t end) const {
  if (shape_.empty()) throw Error("cannot slice a 0-d tensor");
  if (is_quantized(dtype_) && shape_.size() == 1)
    throw Error("cannot slice the elements of a 1-D " + std::string(dtype_name(dtype_)) + " tensor", "",
                "slice whole rows of a 2-D tensor, or dequantize it first with .to(DType::F32)");
  if (start < 0 || end < start || end > shape_[0])
    throw Error("slice [" + std::to_string(start) + ", " + std::to_string(end) + ") out of range for shape " +
                shape_str(shape_));
  Shape s = shape_;
  s[0] = end - start;
  const std::size_t row = shape_[0] ? nbytes() / static_cast<std::size_t>(shape_[0]) : 0;
  return from_storage(storage_, offset_ + static_cast<std::size_t>(start) * row, std::move(s), dtype_);
}

Tensor Tensor::select(int64_t i) const {
  Tensor row = slice(i, i + 1);
  row.shape_.erase(row.shape_.begin());
  return row;
}

Tensor Tensor::reshape(Shape shape) const {
  int64_t known = 1, infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw Error("reshape " + shape_str(shape) + ": only one dimension may be -1");
      infer = static_cast<int64_t>(i);
    } else {
      if (shape[i] < 0) throw Error("reshape: negative dimension in " + shape_str(shape));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel_ % known != 0)
      throw Error("cannot reshape " + shape_str(shape_) + " into " + shape_str(shape));
    shape[static_cast<std::size_t>(infer)] = numel_ / known;
    known = numel_;
  }
  if (known != numel_) throw Error("cannot reshape " + shape_str(shape_) + " into " + shape_str(shape));
  check_blocks(shape, dtype_);
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor[undefined]";
  return "Tensor[" + std::string(dtype_name(dtype_)) + " " + shape_str(shape_) + " " + device().str() + "]";
}

namespace detail {

Tensor tensor_from_host(const void* data, DType src_dtype, std::size_t count, Shape shape, DType dtype) {
  if (static_cast<int64_t>(count) != shape_numel(shape))
    throw Error(std::to_string(count) + " values do not fill shape " + shape_str(shape));
  Tensor t = Tensor::empty(std::move(shape), dtype);
  convert(data, src_dtype, t.raw_data(), dtype, count);
  return t;
}

void tensor_to_host(const Tensor& t, void* out, DType out_dtype) {
  Tensor host = t.to(Device::cpu());
  convert(host.raw_data(), host.dtype(), out, out_dtype, static_cast<std::size_t>(host.numel()));
}

}  // namespace detail
}  // namespace ferry
