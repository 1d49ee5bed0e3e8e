// LayerNorm, RMSNorm and (inference) BatchNorm1d: PyTorch / transformers parameter names, shapes and initial
// values; forwards through ferry::ops (norm.h).
#include "ferry/nn/norm.h"

#include "ferry/core/error.h"
#include "ferry/ops/norm.h"

namespace ferry::nn {

namespace {

const Tensor& input_tensor(const Args& args, const Module& m) {
  const Tensor* x = args.tensor_arg(0, "input");
  if (x == nullptr) x = args.tensor_arg(0, "hidden_states");
  if (x == nullptr) throw Error("forward needs an input tensor (positional 0 or \"input\")", m.type_name());
  return *x;
}

Tensor optional_parameter(const Module& m, std::string_view name) {
  const auto* slot = m.find_parameter_slot(name);
  return slot ? (*slot)->tensor : Tensor();
}

void check_size(int64_t n, const char* what) {
  if (n < 0) throw Error(std::string("negative size for ") + what + ": " + std::to_string(n));
}

}  // namespace

LayerNorm::LayerNorm(int64_t normalized_shape, double eps, bool elementwise_affine, bool bias, DType dtype)
    : dim_(normalized_shape), eps_(eps) {
  check_size(normalized_shape, "LayerNorm");
  if (elementwise_affine) {
    register_parameter("weight", {dim_}, dtype, TensorInit::ones());
    if (bias) register_parameter("bias", {dim_}, dtype, TensorInit::zeros());
  }
}

Value LayerNorm::forward(const Args& args) {
  return ops::layer_norm(input_tensor(args, *this), optional_parameter(*this, "weight"),
                         optional_parameter(*this, "bias"), static_cast<float>(eps_));
}

RMSNorm::RMSNorm(int64_t hidden_size, double eps, DType dtype) : dim_(hidden_size), eps_(eps) {
  check_size(hidden_size, "RMSNorm");
  register_parameter("weight", {dim_}, dtype, TensorInit::ones());
}

Value RMSNorm::forward(const Args& args) {
  return ops::rms_norm(input_tensor(args, *this), weight(), static_cast<float>(eps_));
}

BatchNorm1d::BatchNorm1d(int64_t num_features, double eps, DType dtype) : num_features_(num_features), eps_(eps) {
  check_size(num_features, "BatchNorm1d");
  register_parameter("weight", {num_features}, dtype, TensorInit::ones());
  register_parameter("bias", {num_features}, dtype, TensorInit::zeros());
  register_buffer("running_mean", {num_features}, dtype, TensorInit::zeros());
  register_buffer("running_var", {num_features}, dtype, TensorInit::ones());
  register_buffer("num_batches_tracked", {}, DType::I64, TensorInit::zeros());
}

// Eval-mode batch norm: (x - running_mean) / sqrt(running_var + eps) * weight + bias.
Value BatchNorm1d::forward(const Args& args) {
  return ops::batch_norm(input_tensor(args, *this), buffer("running_mean"), buffer("running_var"),
                         parameter("weight"), parameter("bias"), static_cast<float>(eps_));
}

}  // namespace ferry::nn
