// init_empty_weights / init_on_device: build a model skeleton whose parameters live on meta (no bytes), or
// directly on a chosen device, as Accelerate's context managers of the same names do.
//
// They are scope guards: thread-local (another thread building a model is unaffected), nestable (the innermost
// wins), and undone when the guard goes out of scope, including by an exception.
//
//   {
//     auto guard = ferry::nn::init_empty_weights();
//     auto model = std::make_shared<MyModel>(config);   // 100B parameters, no tensor bytes allocated
//   }
//
// What they affect: Module::register_parameter (and register_buffer when include_buffers), which layer
// constructors call. Code that creates tensors by other means can ask parameter_init_device() /
// buffer_init_device() to do the same. Accelerate patches torch.nn.Module.register_parameter; ferry's layers
// go one step further and never allocate a tensor that would be dropped on meta.
#pragma once

#include <optional>

#include "ferry/core/device.h"

namespace ferry::nn {

/// The guard returned by init_empty_weights / init_on_device. Not copyable or movable: keep it in a local.
class [[nodiscard]] InitDeviceScope {
 public:
  InitDeviceScope(Device device, bool include_buffers);
  ~InitDeviceScope();
  InitDeviceScope(const InitDeviceScope&) = delete;
  InitDeviceScope& operator=(const InitDeviceScope&) = delete;

 private:
  // What the enclosing scopes had set; restored on exit. A scope without include_buffers leaves the buffer
  // device of an enclosing scope in force, as nested Accelerate context managers do.
  std::optional<Device> previous_parameter_device_;
  std::optional<Device> previous_buffer_device_;
};

/// Parameters registered while the guard lives are created on meta; buffers too when include_buffers
/// (otherwise they stay on cpu, as in Accelerate).
/// Accelerate: init_empty_weights(include_buffers=False)
[[nodiscard]] InitDeviceScope init_empty_weights(bool include_buffers = false);

/// Parameters (and buffers when include_buffers) registered while the guard lives are created on `device`.
/// Accelerate: init_on_device(device, include_buffers=False)
[[nodiscard]] InitDeviceScope init_on_device(Device device, bool include_buffers = false);

/// The device a new parameter must be created on in this thread now, or nullopt outside any guard.
std::optional<Device> parameter_init_device() noexcept;
/// Same for buffers: set by the innermost guard made with include_buffers.
std::optional<Device> buffer_init_device() noexcept;

}  // namespace ferry::nn
