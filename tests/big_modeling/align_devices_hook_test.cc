// AlignDevicesHook lifecycle, after Accelerate's tests/test_hooks.py: placement before attach, after attach,
// after forward and after remove.
#include "ferry/big_modeling/align_devices_hook.h"

#include <gtest/gtest.h>

#include "dispatch_support.h"
#include "ferry/big_modeling/attach.h"
#include "ferry/core/memory.h"
#include "ferry/nn/hooks.h"
#include "support/model_for_test.h"

namespace ferry {
namespace {

using test::ModelForTest;
using test::WithVirtualDevices;

class AlignDevicesHookTest : public WithVirtualDevices {};

TEST_F(AlignDevicesHookTest, MovesWeightsAndInputsToTheExecutionDevice) {
  ModelForTest model;
  Tensor x = test::random_input({2, 3});
  Tensor expected = model(x);
  AlignDevicesOptions o;
  o.execution_device = Device::virt(0);
  nn::add_hook_to_module(*model.linear1, std::make_shared<AlignDevicesHook>(o));
  nn::add_hook_to_module(*model.batchnorm, std::make_shared<AlignDevicesHook>(o));
  nn::add_hook_to_module(*model.linear2, std::make_shared<AlignDevicesHook>(o));
  EXPECT_EQ(model.linear1->parameter("weight").device(), Device::virt(0));
  EXPECT_EQ(model.batchnorm->buffer("running_mean").device(), Device::virt(0));
  Tensor out = model(x);
  EXPECT_EQ(out.device(), Device::virt(0));  // no io_same_device: the output stays where it was computed
  EXPECT_TRUE(test::same_values(out.to(Device::cpu()), expected));

  // io_same_device on the root returns the output to the input's device.
  AlignDevicesOptions root;
  root.io_same_device = true;
  nn::add_hook_to_module(model, std::make_shared<AlignDevicesHook>(root));
  EXPECT_EQ(model(x).device(), Device::cpu());
}

TEST_F(AlignDevicesHookTest, OffloadedWeightsAreMetaBetweenCallsAndReleased) {
  ModelForTest model;
  Tensor x = test::random_input({2, 3});
  Tensor expected = model(x);
  AlignDevicesOptions o;
  o.execution_device = Device::virt(0);
  o.offload = true;
  for (nn::Module* m : {static_cast<nn::Module*>(model.linear1.get()), static_cast<nn::Module*>(model.batchnorm.get()),
                        static_cast<nn::Module*>(model.linear2.get())})
    nn::add_hook_to_module(*m, std::make_shared<AlignDevicesHook>(o));
  // After attach: parameters on meta, buffers on the execution device (offload_buffers is off).
  EXPECT_TRUE(model.linear1->parameter("weight").is_meta());
  EXPECT_TRUE(model.batchnorm->parameter("weight").is_meta());
  EXPECT_EQ(model.batchnorm->buffer("running_mean").device(), Device::virt(0));
  EXPECT_TRUE(has_offloaded_params(*model.linear1));

  const auto resident = memory_stats(Device::virt(0)).current;  // the buffers
  reset_peak_memory_stats(Device::virt(0));
  Tensor out = model(x.to(Device::virt(0)));
  EXPECT_TRUE(test::same_values(out.to(Device::cpu()), expected));
  // After the forward: back on meta, every materialised byte released; the peak saw them.
  EXPECT_TRUE(model.linear2->parameter("weight").is_meta());
  EXPECT_GT(memory_stats(Device::virt(0)).peak, resident);
  out = Tensor();
  EXPECT_EQ(memory_stats(Device::virt(0)).current, resident);

  // Removing the hooks restores the weights on their original device (cpu) and a runnable model.
  nn::remove_hook_from_module(model, /*recurse=*/true);
  EXPECT_EQ(model.linear1->parameter("weight").device(), Device::cpu());
  EXPECT_EQ(model.batchnorm->buffer("running_mean").device(), Device::cpu());  // buffers too, as Accelerate
  EXPECT_TRUE(test::same_values(model(x), expected));
}

TEST_F(AlignDevicesHookTest, OffloadBuffersPutsPersistentBuffersOnMetaToo) {
  ModelForTest model;
  Tensor x = test::random_input({2, 3});
  Tensor expected = model(x);
  AlignDevicesOptions o;
  o.execution_device = Device::cpu();
  o.offload = true;
  o.offload_buffers = true;
  nn::add_hook_to_module(*model.batchnorm, std::make_shared<AlignDevicesHook>(o));
  EXPECT_TRUE(model.batchnorm->buffer("running_mean").is_meta());
  EXPECT_TRUE(model.batchnorm->buffer("num_batches_tracked").is_meta());
  EXPECT_TRUE(test::same_values(model(x), expected));
  EXPECT_TRUE(model.batchnorm->buffer("running_var").is_meta());
}

TEST_F(AlignDevicesHookTest, SkipKeysAreNotMoved) {
  ModelForTest model;
  AlignDevicesOptions o;
  o.execution_device = Device::virt(1);
  o.skip_keys = {"past_key_values"};
  auto hook = std::make_shared<AlignDevicesHook>(o);
  nn::Args args{test::random_input({1, 3})};
  args.with("past_key_values", test::random_input({2}));
  args.with("mask", test::random_input({2}));
  nn::Args moved = hook->pre_forward(model, args);
  EXPECT_EQ(moved[0].tensor().device(), Device::virt(1));
  EXPECT_EQ(moved.kwarg("mask")->tensor().device(), Device::virt(1));
  EXPECT_EQ(moved.kwarg("past_key_values")->tensor().device(), Device::cpu());
}

TEST_F(AlignDevicesHookTest, ExceptionInsideForwardReturnsWeightsToMeta) {
  ModelForTest model;
  AlignDevicesOptions o;
  o.execution_device = Device::cpu();
  o.offload = true;
  nn::add_hook_to_module(*model.linear1, std::make_shared<AlignDevicesHook>(o));
  EXPECT_THROW((*model.linear1)(test::random_input({2, 7})), Error);  // wrong in_features
  EXPECT_TRUE(model.linear1->parameter("weight").is_meta());
  EXPECT_EQ((*model.linear1)(test::random_input({2, 3})).shape(), (Shape{2, 4}));
}

TEST_F(AlignDevicesHookTest, AlignModuleDeviceMaterialisesForAScope) {
  ModelForTest model;
  Tensor w = model.linear1->parameter("weight").clone();
  AlignDevicesOptions o;
  o.execution_device = Device::virt(0);
  o.offload = true;
  nn::add_hook_to_module(*model.linear1, std::make_shared<AlignDevicesHook>(o));
  {
    auto scope = align_module_device(*model.linear1);
    EXPECT_EQ(model.linear1->parameter("weight").device(), Device::virt(0));
    EXPECT_TRUE(test::same_values(model.linear1->parameter("weight").to(Device::cpu()), w));
  }
  EXPECT_TRUE(model.linear1->parameter("weight").is_meta());
  {
    auto scope = align_module_device(*model.linear1, Device::cpu());
    EXPECT_EQ(model.linear1->parameter("weight").device(), Device::cpu());
  }
  // A module without hooks is moved and moved back.
  {
    auto scope = align_module_device(*model.linear2, Device::virt(1));
    EXPECT_EQ(model.linear2->parameter("weight").device(), Device::virt(1));
  }
  EXPECT_EQ(model.linear2->parameter("weight").device(), Device::cpu());
}

}  // namespace
}  // namespace ferry
