// DeviceLayer: the GPU twin of one nn::Layer. It keeps the host layer's contract (layer.h):
// forward/backward on [n, ...] batches, parameters as views into arenas, anything backward
// needs beyond in and out kept in a workspace. Here every pointer is device memory: Tensor
// views (nn/tensor.h) whose data points into device buffers, and DeviceArenas with the host
// arenas' layout. All work is queued on the Context's stream. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "nn/cuda/context.h"
#include "nn/cuda/device_arena.h"
#include "nn/layer.h"
#include "nn/tensor.h"

namespace murmur::nn::cuda {

class DeviceLayer {
 public:
  virtual ~DeviceLayer() = default;
  virtual std::string kind() const = 0;
  // Device floats kept from forward to backward for n samples of `input` (one sample's shape).
  virtual std::size_t workspace_floats(const Shape& input, std::int64_t n) const { return 0; }
  virtual void forward(Context& cx, const Tensor& in, Tensor& out, float* workspace,
                       const StepContext& ctx) = 0;
  // As Layer::backward: writes dL/d(in) unless grad_in is undefined, writes or adds
  // (ctx.accumulate_grads) parameter gradients; grad_out may be overwritten.
  virtual void backward(Context& cx, const Tensor& in, const Tensor& out, Tensor& grad_out,
                        Tensor& grad_in, float* workspace, const StepContext& ctx) = 0;
};

// The device arenas a model's layers take their parameters from (by the host names).
struct DeviceArenas {
  DeviceArena& params;
  DeviceArena& grads;
  DeviceArena& buffers;
};

// The device twin of `layer`, the layer named `name` in its Sequential ("" for none), its
// parameters found in `arenas` as "<name>.weight" etc. Returns nullptr for a pure view
// (Flatten), which moves no data. Throws Error for a layer kind with no CUDA version.
std::unique_ptr<DeviceLayer> make_device_layer(const Layer& layer, const std::string& name,
                                               const DeviceArenas& arenas);

// The cuDNN-backed layers (cudnn_layers.cc); nullptr if `layer` is none of Conv2d, MaxPool2d,
// AvgPool2d, BatchNorm2d.
std::unique_ptr<DeviceLayer> make_cudnn_layer(const Layer& layer, const std::string& name,
                                              const DeviceArenas& arenas);

}  // namespace murmur::nn::cuda
