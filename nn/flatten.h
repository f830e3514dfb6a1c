// Flatten: [n, c, h, w] -> [n, c*h*w], PyTorch's nn.Flatten(). A pure view: Sequential aliases
// its input and output buffers and never calls forward or backward on it.
#pragma once

#include <span>
#include <string>

#include "nn/layer.h"

namespace murmur::nn {

class Flatten : public Layer {
 public:
  std::string kind() const override { return "Flatten"; }
  Shape output_shape(const Shape& input) const override { return Shape{input.numel()}; }
  bool is_view() const override { return true; }
  // Copies (for callers that run the layer alone, like the gradient checker).
  void forward(const Tensor& in, Tensor& out, std::span<float> workspace,
               const StepContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                std::span<float> workspace, const StepContext& ctx) override;
};

}  // namespace murmur::nn
