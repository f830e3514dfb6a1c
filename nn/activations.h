// Elementwise activations: ReLU and GELU (the exact erf form, PyTorch's default
// approximate='none'). Shape-preserving, parameter-free; backward reads the cached input/output.
#pragma once

#include <span>
#include <string>

#include "nn/layer.h"

namespace murmur::nn {

class ReLU : public Layer {
 public:
  std::string kind() const override { return "ReLU"; }
  Shape output_shape(const Shape& input) const override { return input; }
  void forward(const Tensor& in, Tensor& out, std::span<float> workspace,
               const StepContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                std::span<float> workspace, const StepContext& ctx) override;
};

// gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2))).
class GELU : public Layer {
 public:
  std::string kind() const override { return "GELU"; }
  Shape output_shape(const Shape& input) const override { return input; }
  void forward(const Tensor& in, Tensor& out, std::span<float> workspace,
               const StepContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                std::span<float> workspace, const StepContext& ctx) override;
};

}  // namespace murmur::nn
