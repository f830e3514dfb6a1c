// The glue between a Device (device/) and a Transport: registering an array of the device's
// memory with the transport, and the collectives' FloatOps (transport/float_ops.h) done by the
// device's op table, so that the ring allreduce runs on the arrays wherever they live.
#pragma once

#include <memory>
#include <span>

#include "device/device.h"
#include "transport/float_ops.h"
#include "transport/transport.h"

namespace murmur::optimizers {

// `array` (memory of `device`) registered with `transport`: register_region for host memory,
// register_device_region otherwise (a StagingTransport takes it, staging_transport.h).
std::unique_ptr<transport::Region> register_array(transport::Transport& transport,
                                                  device::Device& device, std::span<float> array);

// FloatOps on `device`: scratch from device.zeros(), sums with its axpy.
class DeviceFloatOps final : public transport::FloatOps {
 public:
  explicit DeviceFloatOps(device::Device& device) : device_(device) {}
  Scratch scratch(transport::Transport& transport, std::size_t floats) override;
  void add(std::span<float> acc, std::span<const float> in) override { device_.axpy(acc, 1.0f, in); }
  void scale(std::span<float> x, float a) override { device_.scale(x, a); }
  void copy(std::span<float> out, std::span<const float> in) override { device_.copy(out, in); }

 private:
  device::Device& device_;
};

}  // namespace murmur::optimizers
