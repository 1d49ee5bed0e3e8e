// Argument checks shared by the cpu ops: every op validates its inputs here, at its boundary, before any work,
// and reports problems as ferry::Error whose `where` is the op ("ops::linear") and whose problem names the
// argument, its shape and dtype. Kernels below the boundary assume valid, contiguous, host-addressable data.
#pragma once

#include <string>

#include "ferry/core/error.h"
#include "ferry/core/tensor.h"

namespace ferry::ops::cpu {

/// "x f32 [2, 3] on cpu"
std::string describe(const char* name, const Tensor& t);

[[noreturn]] void fail(const char* op, const std::string& problem, const std::string& hint = {});

/// t is defined and its bytes are host-addressable (cpu or virt:N); meta and cuda tensors fail with a hint.
void check_host(const char* op, const char* name, const Tensor& t);
/// check_host and dtype f32.
void check_f32(const char* op, const char* name, const Tensor& t);
/// check_host and a floating-point dtype.
void check_float(const char* op, const char* name, const Tensor& t);
/// t has at least `min_dim` dimensions.
void check_min_dim(const char* op, const char* name, const Tensor& t, int64_t min_dim);
/// t is 1-D with exactly n elements.
void check_vector(const char* op, const char* name, const Tensor& t, int64_t n);
/// Both tensors live on the same device (like torch, ops never move data between devices).
void check_same_device(const char* op, const char* name_a, const Tensor& a, const char* name_b, const Tensor& b);
/// t may be written (not a read-only mapped view).
void check_writable(const char* op, const char* name, const Tensor& t);

/// An output must not share bytes with an input the kernel still reads while writing.
void check_no_overlap(const char* op, const char* out_name, const Tensor& out, const char* in_name, const Tensor& in);
/// out is a defined, writable f32 host tensor of exactly `shape`.
void check_out(const char* op, const Tensor& out, const Shape& shape);

/// A 1-D float parameter (norm weight, bias) converted to f32 on the host; undefined stays undefined.
Tensor param_f32(const char* op, const char* name, const Tensor& t, int64_t n, const Tensor& like);

}  // namespace ferry::ops::cpu
