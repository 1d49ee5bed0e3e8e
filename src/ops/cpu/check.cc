// Argument checks at the boundary of every cpu op (see check.h).
#include "check.h"

#include <fmt/format.h>

namespace ferry::ops::cpu {

std::string describe(const char* name, const Tensor& t) {
  if (!t.defined()) return fmt::format("{} (undefined)", name);
  return fmt::format("{} {} {} on {}", name, dtype_name(t.dtype()), shape_str(t.shape()), t.device().str());
}

void fail(const char* op, const std::string& problem, const std::string& hint) {
  throw Error(problem, std::string("ops::") + op, hint);
}

void check_host(const char* op, const char* name, const Tensor& t) {
  if (!t.defined()) fail(op, fmt::format("{} is undefined", name));
  const Device d = t.device();
  if (d.is_meta())
    fail(op, fmt::format("{} has no data", describe(name, t)),
         "load or materialise the weights before running the op (meta tensors carry shapes only)");
  if (!d.is_host_addressable())
    fail(op, fmt::format("{} is not in host memory", describe(name, t)),
         "the cpu kernels read host memory; move the tensor with .to(Device::cpu())");
}

void check_f32(const char* op, const char* name, const Tensor& t) {
  check_host(op, name, t);
  if (t.dtype() != DType::F32)
    fail(op, fmt::format("{} must be f32", describe(name, t)), "convert it with .to(DType::F32)");
}

void check_float(const char* op, const char* name, const Tensor& t) {
  check_host(op, name, t);
  if (!is_floating_point(t.dtype()))
    fail(op, fmt::format("{} must have a floating-point dtype", describe(name, t)));
}

void check_min_dim(const char* op, const char* name, const Tensor& t, int64_t min_dim) {
  if (t.dim() < min_dim)
    fail(op, fmt::format("{} needs at least {} dimension{}", describe(name, t), min_dim, min_dim == 1 ? "" : "s"));
}

void check_vector(const char* op, const char* name, const Tensor& t, int64_t n) {
  if (t.dim() != 1 || t.size(0) != n)
    fail(op, fmt::format("{} must have shape [{}]", describe(name, t), n));
}

void check_same_device(const char* op, const char* name_a, const Tensor& a, const char* name_b, const Tensor& b) {
  if (a.device() != b.device())
    fail(op, fmt::format("{} and {} are on different devices", describe(name_a, a), describe(name_b, b)),
         "move both to the same device first");
}

void check_writable(const char* op, const char* name, const Tensor& t) {
  if (t.read_only())
    fail(op, fmt::format("{} is a read-only view of a mapped file", describe(name, t)),
         "clone() it before modifying it in place");
}

void check_no_overlap(const char* op, const char* out_name, const Tensor& out, const char* in_name, const Tensor& in) {
  if (!out.shares_storage(in)) return;
  const std::size_t a0 = out.byte_offset(), a1 = a0 + out.nbytes(), b0 = in.byte_offset(), b1 = b0 + in.nbytes();
  if (a0 < b1 && b0 < a1)
    fail(op, fmt::format("{} overlaps {}", describe(out_name, out), describe(in_name, in)),
         "pass a separate output tensor");
}

void check_out(const char* op, const Tensor& out, const Shape& shape) {
  check_f32(op, "out", out);
  check_writable(op, "out", out);
  if (out.shape() != shape)
    fail(op, fmt::format("{} must have shape {}", describe("out", out), shape_str(shape)));
}

Tensor param_f32(const char* op, const char* name, const Tensor& t, int64_t n, const Tensor& like) {
  if (!t.defined()) return t;
  check_float(op, name, t);
  check_same_device(op, "x", like, name, t);
  check_vector(op, name, t, n);
  return t.to(DType::F32);
}

}  // namespace ferry::ops::cpu
