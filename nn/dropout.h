// Dropout (inverted, as PyTorch): in training each element is zeroed with probability p and
// the survivors scaled by 1/(1-p); in evaluation it is the identity. The mask comes from
// ctx.rng and is kept in the workspace for backward.
#pragma once

#include <span>
#include <string>

#include "nn/layer.h"

namespace murmur::nn {

class Dropout : public Layer {
 public:
  // Throws ConfigError unless 0 <= p < 1.
  explicit Dropout(double p);

  std::string kind() const override { return "Dropout"; }
  std::string describe() const override;
  Shape output_shape(const Shape& input) const override { return input; }
  std::size_t workspace_floats(const Shape& input, std::int64_t n) const override;
  void forward(const Tensor& in, Tensor& out, std::span<float> workspace,
               const StepContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                std::span<float> workspace, const StepContext& ctx) override;

  double p() const { return p_; }

 private:
  double p_;
  bool last_training_ = false;
};

}  // namespace murmur::nn
