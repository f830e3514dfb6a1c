// Conv2d: PyTorch's nn.Conv2d (groups=1, dilation=1, zero padding) on [n, c, h, w] batches:
// weight [out, in, kh, kw], bias [out]. im2col + OpenBLAS GEMM (nn/cpu/conv.h); the columns
// stay in the workspace from forward to backward. It can absorb a following ReLU (bias and
// ReLU in one pass). Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "nn/cpu/conv.h"
#include "nn/layer.h"

namespace murmur::nn {

struct Conv2dOptions {
  int kernel_h = 3, kernel_w = 3;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  bool bias = true;
};

class Conv2d : public Layer {
 public:
  // A square kernel, stride and padding. Throws ConfigError unless sizes and strides are
  // positive and padding is >= 0.
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, int kernel, int stride = 1,
         int padding = 0, bool bias = true);
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, const Conv2dOptions& options);

  std::string kind() const override { return "Conv2d"; }
  std::string describe() const override;
  void declare(ParamDeclarer& decl) override;
  void bind(ParamViews& views) override;
  // kaiming_uniform_(a=sqrt(5)) for the weight and U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the
  // bias, fan_in = in * kh * kw, as torch.nn.Conv2d.reset_parameters.
  void init(Rng& rng) override;
  // Throws ConfigError unless input is [in_channels, h, w] and the kernel fits the padded input.
  Shape output_shape(const Shape& input) const override;
  std::size_t workspace_floats(const Shape& input, std::int64_t n) const override;
  bool absorb(const Layer& next) override;
  void forward(const Tensor& in, Tensor& out, std::span<float> workspace,
               const StepContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                std::span<float> workspace, const StepContext& ctx) override;

  bool fused_relu() const { return fused_relu_; }
  std::int64_t in_channels() const { return in_; }
  std::int64_t out_channels() const { return out_; }
  const Conv2dOptions& options() const { return opt_; }

 private:
  cpu::ConvGeometry geometry(const Shape& sample, std::int64_t n) const;

  std::int64_t in_, out_;
  Conv2dOptions opt_;
  bool fused_relu_ = false;
  std::size_t weight_index_ = 0, bias_index_ = 0;
  std::span<float> weight_, bias_, weight_grad_, bias_grad_;
};

}  // namespace murmur::nn
