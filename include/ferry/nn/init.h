// How a layer's constructor fills a new parameter or buffer: zeros, ones, a constant, or a seeded uniform/normal.
//
// Values are normally loaded from a checkpoint, so initialisation only has to be deterministic and sensible:
// layers follow PyTorch's distributions (Linear: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias, i.e.
// kaiming_uniform(a=sqrt(5)); Embedding: N(0, 1); GPT-2 Conv1D: N(0, 0.02)), drawn from one process-wide
// generator seeded by manual_seed (default seed 0). The numbers differ from PyTorch's (different generator).
// Inside init_empty_weights nothing is drawn and nothing allocated (see empty_weights.h).
#pragma once

#include <cstdint>

#include "ferry/core/device.h"
#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"

namespace ferry::nn {

struct TensorInit {
  enum class Kind : uint8_t { Zeros, Full, Uniform, Normal };
  Kind kind = Kind::Zeros;
  double a = 0;  // Full: value; Uniform: low;  Normal: mean
  double b = 0;  //              Uniform: high; Normal: std

  static TensorInit zeros() { return {Kind::Zeros, 0, 0}; }
  static TensorInit ones() { return {Kind::Full, 1, 0}; }
  static TensorInit full(double value) { return {Kind::Full, value, 0}; }
  static TensorInit uniform(double low, double high) { return {Kind::Uniform, low, high}; }
  static TensorInit normal(double mean, double std) { return {Kind::Normal, mean, std}; }
};

/// Seeds the generator behind TensorInit::uniform/normal (like torch.manual_seed). Thread-safe.
void manual_seed(uint64_t seed);

/// A new tensor of `shape` and `dtype` on `device`, filled by `init`. On meta nothing is allocated or drawn.
/// Random values are drawn in f32 on the host, then converted and moved.
Tensor make_tensor(const Shape& shape, DType dtype, Device device, const TensorInit& init);

}  // namespace ferry::nn
