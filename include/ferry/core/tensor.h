// Tensor: a contiguous, row-major array of one DType on one Device — a cheap handle (shape + dtype + shared
// Storage + byte offset). Copying a Tensor copies the handle, never the bytes; clone() copies bytes.
//
// Devices: cpu and virt:N tensors are host-addressable; a meta tensor has shape and dtype only (no bytes);
// cuda:N tensors go through the CUDA backend. Moving off meta without data is an error, as in Accelerate.
// Views (slice/select/reshape) share storage. Not synchronised: share a Tensor across threads read-only.
// Quantized tensors (q8_0 ... q6_k, see dtype.h) hold whole blocks per row: their last dimension is a multiple of
// the block size, slices take whole rows, to(DType) (de)quantizes, and nbytes() counts blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/core/dtype.h"
#include "ferry/core/storage.h"

namespace ferry {

using Shape = std::vector<int64_t>;

/// Product of dims; throws ferry::Error on a negative dim or int64 overflow.
int64_t shape_numel(const Shape& shape);
/// "[2, 3, 4]"
std::string shape_str(const Shape& shape);

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::F32;
  else if constexpr (std::is_same_v<T, double>) return DType::F64;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::I8;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::U8;
  else if constexpr (std::is_same_v<T, int16_t>) return DType::I16;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::I32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::I64;
  else if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  else static_assert(sizeof(T) == 0, "no DType for this C++ type; use data_as<T>() for f16/bf16/fp8 bits");
}

class Tensor {
 public:
  /// An undefined tensor (defined() == false), e.g. an absent bias.
  Tensor() = default;

  /// Uninitialised bytes on `device` (meta: none at all).
  static Tensor empty(Shape shape, DType dtype, Device device = Device::cpu());
  static Tensor zeros(Shape shape, DType dtype, Device device = Device::cpu());
  /// Every element = value, converted exactly to dtype.
  static Tensor full(Shape shape, double value, DType dtype, Device device = Device::cpu());
  /// Copies `values` (converted from T to dtype) into a new cpu tensor of `shape`.
  template <class T>
  static Tensor from_vector(std::span<const T> values, Shape shape, DType dtype = dtype_of<T>());
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape, DType dtype = dtype_of<T>()) {
    return from_vector(std::span<const T>(values), std::move(shape), dtype);
  }
  /// A view of `storage` starting at `byte_offset`; throws when shape x dtype does not fit.
  static Tensor from_storage(std::shared_ptr<Storage> storage, std::size_t byte_offset, Shape shape, DType dtype);

  bool defined() const noexcept { return storage_ != nullptr; }
  const Shape& shape() const noexcept { return shape_; }
  int64_t dim() const noexcept { return static_cast<int64_t>(shape_.size()); }
  /// Size of dimension i; negative i counts from the end. Throws when out of range.
  int64_t size(int64_t i) const;
  int64_t numel() const noexcept { return numel_; }
  DType dtype() const noexcept { return dtype_; }
  Device device() const noexcept { return storage_ ? storage_->device() : Device::meta(); }
  bool is_meta() const noexcept { return device().is_meta(); }
  std::size_t nbytes() const noexcept { return dtype_nbytes(dtype_, numel_); }
  const std::shared_ptr<Storage>& storage() const noexcept { return storage_; }
  std::size_t byte_offset() const noexcept { return offset_; }
  bool read_only() const noexcept { return storage_ && storage_->read_only(); }

  /// Pointer to the first element. Throws for meta/undefined tensors and for non-host devices (use to(cpu)).
  void* raw_data() const;
  /// Typed pointer; throws when T does not match dtype().
  template <class T>
  T* data() const {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(raw_data());
  }
  /// Typed pointer without the dtype check, for the bit patterns of f16/bf16/fp8 (uint16_t / uint8_t).
  template <class T>
  T* data_as() const {
    check_element_size(sizeof(T));
    return static_cast<T*>(raw_data());
  }

  /// Same device, new dtype (exact RNE conversion, see convert.h). Same dtype returns *this (no copy).
  Tensor to(DType dtype, bool saturate = false) const;
  /// Same dtype, new device. Same device returns *this. meta -> anything throws (no data to move);
  /// anything -> meta drops the bytes; disk is not a tensor device.
  Tensor to(Device device) const;
  Tensor to(Device device, DType dtype) const;
  /// A copy with its own bytes on the same device.
  Tensor clone() const;
  /// Copies `src` into this tensor's bytes (same shape; dtype converted). Throws for read-only or meta.
  void copy_from(const Tensor& src);

  /// View of rows [start, end) of the leading dimension.
  Tensor slice(int64_t start, int64_t end) const;
  /// View of row i of the leading dimension (one dimension fewer).
  Tensor select(int64_t i) const;
  /// View with a new shape of the same numel; one dim may be -1.
  Tensor reshape(Shape shape) const;

  /// Same bytes, same shape and dtype: the identity that tied parameters keep.
  bool is_same(const Tensor& other) const noexcept {
    return storage_ == other.storage_ && offset_ == other.offset_ && shape_ == other.shape_ &&
           dtype_ == other.dtype_;
  }
  bool shares_storage(const Tensor& other) const noexcept { return storage_ && storage_ == other.storage_; }

  /// All elements converted to T, copied to host (for tests and small reads).
  template <class T>
  std::vector<T> to_vector() const;
  template <class T>
  T item() const;

  /// "Tensor[f32 [2, 3] cpu]"
  std::string str() const;

 private:
  void check_dtype(DType want) const;
  void check_element_size(std::size_t bytes) const;

  std::shared_ptr<Storage> storage_;
  std::size_t offset_ = 0;
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::F32;
};

// ---- templates ----------------------------------------------------------------------------------------------

namespace detail {
Tensor tensor_from_host(const void* data, DType src_dtype, std::size_t count, Shape shape, DType dtype);
void tensor_to_host(const Tensor& t, void* out, DType out_dtype);
}  // namespace detail

template <class T>
Tensor Tensor::from_vector(std::span<const T> values, Shape shape, DType dtype) {
  return detail::tensor_from_host(values.data(), dtype_of<T>(), values.size(), std::move(shape), dtype);
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  std::vector<T> out(static_cast<std::size_t>(numel_));
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> tmp(out.size());
    detail::tensor_to_host(*this, tmp.data(), DType::Bool);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = tmp[i] != 0;
  } else {
    detail::tensor_to_host(*this, out.data(), dtype_of<T>());
  }
  return out;
}

template <class T>
T Tensor::item() const {
  return to_vector<T>().at(0);
}

}  // namespace ferry
