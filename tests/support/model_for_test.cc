// Accelerate's test models (tests/test_modeling_utils.py, tests/test_hooks.py) built from ferry::nn layers.
#include "support/model_for_test.h"

#include "ferry/ops/linear.h"

namespace ferry::test {

ModelForTest::ModelForTest() {
  linear1 = register_module("linear1", std::make_shared<nn::Linear>(3, 4));
  batchnorm = register_module("batchnorm", std::make_shared<nn::BatchNorm1d>(4));
  linear2 = register_module("linear2", std::make_shared<nn::Linear>(4, 5));
}

nn::Value ModelForTest::forward(const nn::Args& args) {
  return (*linear2)((*batchnorm)((*linear1)(args[0].tensor())));
}

std::shared_ptr<nn::Sequential> sequential_model(int n) {
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> layers;
  for (int i = 1; i <= n; ++i) layers.emplace_back("linear" + std::to_string(i), std::make_shared<nn::Linear>(4, 4));
  return std::make_shared<nn::Sequential>(std::move(layers));
}

LinearWithNonPersistentBuffers::LinearWithNonPersistentBuffers(int64_t in_features, int64_t out_features) {
  register_buffer("weight", {out_features, in_features}, DType::F32, nn::TensorInit::ones());
  register_buffer("bias", {out_features}, DType::F32, nn::TensorInit::ones(), /*persistent=*/false);
}

nn::Value LinearWithNonPersistentBuffers::forward(const nn::Args& args) {
  return ops::linear(args[0].tensor(), buffer("weight"), buffer("bias"));
}

}  // namespace ferry::test
