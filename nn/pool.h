// MaxPool2d and AvgPool2d: PyTorch's nn.MaxPool2d / nn.AvgPool2d (floor mode, dilation 1;
// average counts padding, count_include_pad=True) on [n, c, h, w] batches. No parameters.
// MaxPool2d keeps each output's argmax in the workspace for backward. Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "nn/cpu/pool.h"
#include "nn/layer.h"

namespace murmur::nn {

// Window, stride and padding of a pooling layer; stride 0 means "equal to the kernel", as
// PyTorch's stride=None.
struct PoolOptions {
  int kernel_h = 2, kernel_w = 2;
  int stride_h = 0, stride_w = 0;
  int pad_h = 0, pad_w = 0;
};

// What the two pooling layers share: options, shape checks and the kernel geometry.
class Pool2d : public Layer {
 public:
  // Throws ConfigError unless the kernel is positive, strides >= 0, and 0 <= padding <=
  // kernel / 2.
  explicit Pool2d(const PoolOptions& options);
  std::string describe() const override;
  // Throws ConfigError unless input is [c, h, w] and the window fits the padded input.
  Shape output_shape(const Shape& input) const override;
  // Strides resolved (never 0).
  const PoolOptions& options() const { return opt_; }

 protected:
  cpu::PoolGeometry geometry(const Shape& batch_shape) const;
  PoolOptions opt_;
};

class MaxPool2d : public Pool2d {
 public:
  // A square window; stride 0 = kernel.
  explicit MaxPool2d(int kernel, int stride = 0, int padding = 0);
  explicit MaxPool2d(const PoolOptions& options) : Pool2d(options) {}
  std::string kind() const override { return "MaxPool2d"; }
  std::size_t workspace_floats(const Shape& input, std::int64_t n) const override;
  void forward(const Tensor& in, Tensor& out, std::span<float> workspace,
               const StepContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                std::span<float> workspace, const StepContext& ctx) override;
};

class AvgPool2d : public Pool2d {
 public:
  explicit AvgPool2d(int kernel, int stride = 0, int padding = 0);
  explicit AvgPool2d(const PoolOptions& options) : Pool2d(options) {}
  std::string kind() const override { return "AvgPool2d"; }
  void forward(const Tensor& in, Tensor& out, std::span<float> workspace,
               const StepContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                std::span<float> workspace, const StepContext& ctx) override;
};

}  // namespace murmur::nn
