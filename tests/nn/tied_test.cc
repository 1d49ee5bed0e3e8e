// Tied parameters (Accelerate test_modeling_utils.py test_find_tied_parameters / test_retie_parameters), plus
// ferry's guarantee that ties survive moves with no duplicate bytes.
#include "ferry/nn/tied.h"

#include <gtest/gtest.h>

#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/core/memory.h"
#include "ferry/nn/containers.h"
#include "ferry/nn/linear.h"
#include "ferry/nn/module_tensors.h"
#include "support/model_for_test.h"

namespace ferry::nn {
namespace {

using Groups = std::vector<std::vector<std::string>>;
using test::sequential_model;

void tie(Module& model, const std::string& dst, const std::string& src) {
  auto [owner, local] = resolve_tensor_owner(model, dst);
  owner->register_parameter(local, find_tensor_slot(model, src));
}

TEST(FindTiedParameters, AcceleratesCases) {
  auto model = sequential_model(4);
  EXPECT_EQ(find_tied_parameters(*model), Groups{});
  tie(*model, "linear2.weight", "linear1.weight");
  EXPECT_EQ(find_tied_parameters(*model), (Groups{{"linear1.weight", "linear2.weight"}}));
  tie(*model, "linear4.weight", "linear1.weight");
  EXPECT_EQ(find_tied_parameters(*model), (Groups{{"linear1.weight", "linear2.weight", "linear4.weight"}}));

  model = sequential_model(5);
  tie(*model, "linear1.weight", "linear4.weight");
  tie(*model, "linear2.weight", "linear3.weight");
  tie(*model, "linear5.weight", "linear2.weight");
  EXPECT_EQ(find_tied_parameters(*model),
            (Groups{{"linear1.weight", "linear4.weight"}, {"linear2.weight", "linear3.weight", "linear5.weight"}}));

  Sequential nested({{"block1", sequential_model(4)}, {"block2", sequential_model(4)}});
  tie(nested, "block1.linear1.weight", "block2.linear1.weight");
  EXPECT_EQ(find_tied_parameters(nested), (Groups{{"block1.linear1.weight", "block2.linear1.weight"}}));

  auto layer = std::make_shared<Linear>(10, 10);
  Sequential twice({layer, layer});
  EXPECT_EQ(find_tied_parameters(twice), (Groups{{"0.bias", "1.bias"}, {"0.weight", "1.weight"}}));
}

TEST(RetieParameters, AcceleratesCases) {
  auto model = sequential_model(2);
  retie_parameters(*model, {{"linear1.weight", "linear2.weight"}});
  EXPECT_EQ(find_tensor_slot(*model, "linear1.weight"), find_tensor_slot(*model, "linear2.weight"));

  model = sequential_model(5);
  retie_parameters(*model, {{"linear1.weight", "linear4.weight"}, {"linear2.weight", "linear3.weight", "linear5.weight"}});
  EXPECT_EQ(find_tensor_slot(*model, "linear1.weight"), find_tensor_slot(*model, "linear4.weight"));
  EXPECT_EQ(find_tensor_slot(*model, "linear2.weight"), find_tensor_slot(*model, "linear5.weight"));
  EXPECT_NE(find_tensor_slot(*model, "linear1.weight"), find_tensor_slot(*model, "linear2.weight"));

  Sequential nested({{"block1", sequential_model(4)}, {"block2", sequential_model(4)}});
  retie_parameters(nested, {{"block1.linear1.weight", "block2.linear1.weight"}});
  EXPECT_EQ(find_tensor_slot(nested, "block1.linear1.weight"), find_tensor_slot(nested, "block2.linear1.weight"));
}

TEST(RetieParameters, KeepsTheFirstNonMetaTensorAndRejectsBadNames) {
  auto model = sequential_model(2);
  set_module_tensor_to_device(*model, "linear1.weight", Device::meta());
  Tensor keep = model->get_submodule("linear2").parameter("weight");
  retie_parameters(*model, {{"linear1.weight", "linear2.weight"}});
  EXPECT_TRUE(model->get_submodule("linear1").parameter("weight").is_same(keep));
  // All meta: left alone.
  auto meta = sequential_model(2);
  meta->to(Device::meta());
  retie_parameters(*meta, {{"linear1.weight", "linear2.weight"}});
  EXPECT_NE(find_tensor_slot(*meta, "linear1.weight"), find_tensor_slot(*meta, "linear2.weight"));
  EXPECT_THROW(retie_parameters(*model, {{"linear1.weight", "linear7.weight"}}), Error);
}

TEST(TiedParameters, SurviveModuleToWithoutDuplicateBytes) {
  enable_virtual_devices({});
  auto layer = std::make_shared<Linear>(10, 10);
  Sequential model({layer, layer});
  auto extra = std::make_shared<Linear>(10, 10, /*bias=*/false);
  extra->register_parameter("weight", layer->parameter_slot("weight"));
  model.push_back(extra);
  const int64_t before = memory_stats(Device::virt(0)).current;
  model.to(Device::virt(0));
  EXPECT_EQ(memory_stats(Device::virt(0)).current - before, (100 + 10) * 4);  // one weight, one bias
  EXPECT_TRUE(extra->weight().is_same(layer->weight()));
  EXPECT_EQ(find_tied_parameters(model), (Groups{{"0.bias", "1.bias"}, {"0.weight", "1.weight", "2.weight"}}));
  model.to(Device::meta());
  EXPECT_TRUE(extra->weight().is_meta());
  EXPECT_EQ(memory_stats(Device::virt(0)).current, before);
  disable_virtual_devices();
}

}  // namespace
}  // namespace ferry::nn
