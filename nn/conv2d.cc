#include "nn/conv2d.h"

#include <fmt/format.h>

#include "core/error.h"
#include "nn/activations.h"
#include "nn/cpu/elementwise.h"
#include "nn/init.h"

namespace murmur::nn {

Conv2d::Conv2d(std::int64_t in_channels, std::int64_t out_channels, int kernel, int stride,
               int padding, bool bias)
    : Conv2d(in_channels, out_channels,
             Conv2dOptions{kernel, kernel, stride, stride, padding, padding, bias}) {}

Conv2d::Conv2d(std::int64_t in_channels, std::int64_t out_channels, const Conv2dOptions& options)
    : in_(in_channels), out_(out_channels), opt_(options) {
  if (in_ <= 0 || out_ <= 0 || opt_.kernel_h <= 0 || opt_.kernel_w <= 0 || opt_.stride_h <= 0 ||
      opt_.stride_w <= 0 || opt_.pad_h < 0 || opt_.pad_w < 0) {
    throw ConfigError(fmt::format(
        "Conv2d({} -> {}, kernel {}x{}, stride {}x{}, padding {}x{}): channels, kernel and "
        "stride must be positive, padding >= 0",
        in_, out_, opt_.kernel_h, opt_.kernel_w, opt_.stride_h, opt_.stride_w, opt_.pad_h,
        opt_.pad_w));
  }
}

std::string Conv2d::describe() const {
  return fmt::format("Conv2d({} -> {}, kernel {}x{}, stride {}x{}, padding {}x{}{}{})", in_, out_,
                     opt_.kernel_h, opt_.kernel_w, opt_.stride_h, opt_.stride_w, opt_.pad_h,
                     opt_.pad_w, opt_.bias ? "" : ", no bias", fused_relu_ ? ", fused ReLU" : "");
}

void Conv2d::declare(ParamDeclarer& decl) {
  weight_index_ = decl.param("weight", {out_, in_, opt_.kernel_h, opt_.kernel_w});
  if (opt_.bias) bias_index_ = decl.param("bias", {out_});
}

void Conv2d::bind(ParamViews& views) {
  weight_ = views.param(weight_index_);
  weight_grad_ = views.grad(weight_index_);
  if (opt_.bias) {
    bias_ = views.param(bias_index_);
    bias_grad_ = views.grad(bias_index_);
  }
}

void Conv2d::init(Rng& rng) {
  const std::int64_t fan_in = in_ * opt_.kernel_h * opt_.kernel_w;
  uniform_(weight_, default_weight_bound(fan_in), rng);
  if (opt_.bias) uniform_(bias_, default_bias_bound(fan_in), rng);
}

cpu::ConvGeometry Conv2d::geometry(const Shape& sample, std::int64_t n) const {
  if (sample.rank() != 3 || sample[0] != in_) {
    throw ConfigError(
        fmt::format("{}: input of shape {}, expected [{}, h, w]", describe(), sample.str(), in_));
  }
  cpu::ConvGeometry g;
  g.batch = static_cast<int>(n);
  g.in_channels = static_cast<int>(in_);
  g.in_h = static_cast<int>(sample[1]);
  g.in_w = static_cast<int>(sample[2]);
  g.out_channels = static_cast<int>(out_);
  g.kernel_h = opt_.kernel_h;
  g.kernel_w = opt_.kernel_w;
  g.stride_h = opt_.stride_h;
  g.stride_w = opt_.stride_w;
  g.pad_h = opt_.pad_h;
  g.pad_w = opt_.pad_w;
  return g;
}

Shape Conv2d::output_shape(const Shape& input) const {
  cpu::ConvGeometry g = geometry(input, 1);
  try {
    g.validate();
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: input {}: {}", describe(), input.str(), e.what()));
  }
  return Shape{out_, g.out_h(), g.out_w()};
}

std::size_t Conv2d::workspace_floats(const Shape& input, std::int64_t n) const {
  return cpu::conv2d_workspace_floats(geometry(input, n));
}

bool Conv2d::absorb(const Layer& next) {
  if (fused_relu_ || dynamic_cast<const ReLU*>(&next) == nullptr) return false;
  fused_relu_ = true;
  return true;
}

void Conv2d::forward(const Tensor& in, Tensor& out, std::span<float> workspace,
                     const StepContext& ctx) {
  const cpu::ConvGeometry g = geometry(in.shape.sample(), in.rows());
  cpu::conv2d_forward(g, in.data, weight_.data(), opt_.bias ? bias_.data() : nullptr, out.data,
                      workspace.data(), fused_relu_);
}

void Conv2d::backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                      std::span<float> workspace, const StepContext& ctx) {
  const cpu::ConvGeometry g = geometry(in.shape.sample(), in.rows());
  // The absorbed ReLU's backward: its output is our output, so the mask is out > 0.
  if (fused_relu_) cpu::relu_backward(grad_out.data, grad_out.data, out.data, out.numel());
  cpu::ConvBackwardOptions options;
  options.accumulate = ctx.accumulate_grads;
  options.columns_cached = true;  // Layer contract: workspace holds what forward left there
  cpu::conv2d_backward(g, in.data, weight_.data(), grad_out.data,
                       grad_in.defined() ? grad_in.data : nullptr, weight_grad_.data(),
                       opt_.bias ? bias_grad_.data() : nullptr, workspace.data(), options);
}

}  // namespace murmur::nn
