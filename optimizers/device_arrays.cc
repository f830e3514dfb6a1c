#include "optimizers/device_arrays.h"

namespace murmur::optimizers {

std::unique_ptr<transport::Region> register_array(transport::Transport& transport,
                                                  device::Device& device, std::span<float> array) {
  const std::span<std::byte> bytes = std::as_writable_bytes(array);
  return device.host_memory() ? transport.register_region(bytes)
                              : transport.register_device_region(bytes);
}

transport::FloatOps::Scratch DeviceFloatOps::scratch(transport::Transport& transport,
                                                     std::size_t floats) {
  device::Array array = device_.zeros(floats);
  Scratch s;
  s.owner = std::make_shared<device::Array>(array);
  s.floats = array.span();
  s.region = register_array(transport, device_, s.floats);
  return s;
}

}  // namespace murmur::optimizers
