// Linear and GPT-2's Conv1D: parameter shapes and initialisation as in PyTorch / transformers, forwards through
// ferry::ops.
#include "ferry/nn/linear.h"

#include <cmath>

#include "ferry/core/error.h"
#include "ferry/ops/elementwise.h"
#include "ferry/ops/linear.h"

namespace ferry::nn {

namespace {

const Tensor& input_tensor(const Args& args, const Module& m) {
  const Tensor* x = args.tensor_arg(0, "input");
  if (x == nullptr) throw Error("forward needs an input tensor (positional 0 or \"input\")", m.type_name());
  return *x;
}

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, DType dtype)
    : in_features_(in_features), out_features_(out_features) {
  if (in_features < 0 || out_features < 0)
    throw Error("negative size: Linear(" + std::to_string(in_features) + ", " + std::to_string(out_features) + ")");
  // PyTorch: kaiming_uniform_(a=sqrt(5)) gives U(-1/sqrt(in), 1/sqrt(in)); the bias uses the same bound.
  const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
  register_parameter("weight", {out_features, in_features}, dtype, TensorInit::uniform(-bound, bound));
  if (bias) register_parameter("bias", {out_features}, dtype, TensorInit::uniform(-bound, bound));
}

Tensor Linear::bias() const {
  const auto* slot = find_parameter_slot("bias");
  return slot ? (*slot)->tensor : Tensor();
}

Value Linear::forward(const Args& args) { return ops::linear(input_tensor(args, *this), weight(), bias()); }

Conv1D::Conv1D(int64_t nf, int64_t nx, DType dtype) : nf_(nf), nx_(nx) {
  if (nf < 0 || nx < 0) throw Error("negative size: Conv1D(" + std::to_string(nf) + ", " + std::to_string(nx) + ")");
  register_parameter("weight", {nx, nf}, dtype, TensorInit::normal(0.0, 0.02));
  register_parameter("bias", {nf}, dtype, TensorInit::zeros());
}

// transformers: x = addmm(bias, x.view(-1, nx), weight).view(*x.shape[:-1], nf)
Value Conv1D::forward(const Args& args) {
  const Tensor& x = input_tensor(args, *this);
  if (x.dim() < 1 || x.size(-1) != nx_)
    throw Error("input " + shape_str(x.shape()) + " does not end in nx = " + std::to_string(nx_), type_name());
  Shape out_shape = x.shape();
  out_shape.back() = nf_;
  // ops::matmul takes f32 operands: weights stored in another dtype are widened for this call.
  Tensor y = ops::matmul(x.reshape({-1, nx_}), weight().to(DType::F32));
  ops::add_(y, bias().to(DType::F32));
  return y.reshape(out_shape);
}

}  // namespace ferry::nn
