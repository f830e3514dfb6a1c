// Linear: y = x W^T + b, PyTorch's nn.Linear (weight [out, in], bias [out]), on [n, in]
// batches with OpenBLAS sgemm. It can absorb a following ReLU (bias and ReLU in one pass after
// the GEMM, and the ReLU mask applied inside backward). Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "nn/layer.h"

namespace murmur::nn {

class Linear : public Layer {
 public:
  // Throws ConfigError unless in > 0 and out > 0.
  Linear(std::int64_t in, std::int64_t out, bool bias = true);

  std::string kind() const override { return "Linear"; }
  std::string describe() const override;
  void declare(ParamDeclarer& decl) override;
  void bind(ParamViews& views) override;
  // kaiming_uniform_(a=sqrt(5)) for the weight and U(-1/sqrt(in), 1/sqrt(in)) for the bias,
  // which is U(-1/sqrt(in), 1/sqrt(in)) for both, as torch.nn.Linear.reset_parameters.
  void init(Rng& rng) override;
  Shape output_shape(const Shape& input) const override;
  bool absorb(const Layer& next) override;
  void forward(const Tensor& in, Tensor& out, std::span<float> workspace,
               const StepContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                std::span<float> workspace, const StepContext& ctx) override;

  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }
  bool fused_relu() const { return fused_relu_; }
  bool has_bias() const { return has_bias_; }

 private:
  std::int64_t in_, out_;
  bool has_bias_;
  bool fused_relu_ = false;
  std::size_t weight_index_ = 0, bias_index_ = 0;
  std::span<float> weight_, bias_, weight_grad_, bias_grad_;
};

}  // namespace murmur::nn
