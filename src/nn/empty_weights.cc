// init_empty_weights / init_on_device: a thread-local record of the device new parameters (and buffers) must be
// created on, set and restored by scope guards. Module::register_* consult it.
#include "ferry/nn/empty_weights.h"

#include "ferry/core/error.h"

namespace ferry::nn {

namespace {

struct InitState {
  std::optional<Device> parameter_device;
  std::optional<Device> buffer_device;
};

thread_local InitState g_state;

}  // namespace

InitDeviceScope::InitDeviceScope(Device device, bool include_buffers)
    : previous_parameter_device_(g_state.parameter_device), previous_buffer_device_(g_state.buffer_device) {
  if (device.is_disk())
    throw Error("cannot create tensors on 'disk'", "init_on_device",
                "use init_empty_weights() and put weights on disk with disk_offload / an offload folder");
  g_state.parameter_device = device;
  if (include_buffers) g_state.buffer_device = device;
}

InitDeviceScope::~InitDeviceScope() {
  g_state.parameter_device = previous_parameter_device_;
  g_state.buffer_device = previous_buffer_device_;
}

InitDeviceScope init_empty_weights(bool include_buffers) { return InitDeviceScope(Device::meta(), include_buffers); }

InitDeviceScope init_on_device(Device device, bool include_buffers) { return InitDeviceScope(device, include_buffers); }

std::optional<Device> parameter_init_device() noexcept { return g_state.parameter_device; }

std::optional<Device> buffer_init_device() noexcept { return g_state.buffer_device; }

}  // namespace ferry::nn
