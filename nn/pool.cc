#include "nn/pool.h"

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::nn {
namespace {

PoolOptions square(int kernel, int stride, int padding) {
  return PoolOptions{kernel, kernel, stride, stride, padding, padding};
}

}  // namespace

Pool2d::Pool2d(const PoolOptions& options) : opt_(options) {
  if (opt_.stride_h == 0) opt_.stride_h = opt_.kernel_h;
  if (opt_.stride_w == 0) opt_.stride_w = opt_.kernel_w;
  if (opt_.kernel_h <= 0 || opt_.kernel_w <= 0 || opt_.stride_h <= 0 || opt_.stride_w <= 0 ||
      opt_.pad_h < 0 || opt_.pad_w < 0 || 2 * opt_.pad_h > opt_.kernel_h ||
      2 * opt_.pad_w > opt_.kernel_w) {
    throw ConfigError(fmt::format(
        "pooling (kernel {}x{}, stride {}x{}, padding {}x{}): kernel and stride must be "
        "positive, padding between 0 and half the kernel",
        options.kernel_h, options.kernel_w, options.stride_h, options.stride_w, options.pad_h,
        options.pad_w));
  }
}

std::string Pool2d::describe() const {
  return fmt::format("{}(kernel {}x{}, stride {}x{}, padding {}x{})", kind(), opt_.kernel_h,
                     opt_.kernel_w, opt_.stride_h, opt_.stride_w, opt_.pad_h, opt_.pad_w);
}

cpu::PoolGeometry Pool2d::geometry(const Shape& batch_shape) const {
  if (batch_shape.rank() != 4) {
    throw ConfigError(
        fmt::format("{}: batch of shape {}, expected [n, c, h, w]", describe(), batch_shape.str()));
  }
  cpu::PoolGeometry g;
  g.planes = static_cast<int>(batch_shape[0] * batch_shape[1]);
  g.in_h = static_cast<int>(batch_shape[2]);
  g.in_w = static_cast<int>(batch_shape[3]);
  g.kernel_h = opt_.kernel_h;
  g.kernel_w = opt_.kernel_w;
  g.stride_h = opt_.stride_h;
  g.stride_w = opt_.stride_w;
  g.pad_h = opt_.pad_h;
  g.pad_w = opt_.pad_w;
  return g;
}

Shape Pool2d::output_shape(const Shape& input) const {
  if (input.rank() != 3) {
    throw ConfigError(
        fmt::format("{}: input of shape {}, expected [c, h, w]", describe(), input.str()));
  }
  const cpu::PoolGeometry g = geometry(input.batched(1));
  try {
    g.validate();
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: input {}: {}", describe(), input.str(), e.what()));
  }
  return Shape{input[0], g.out_h(), g.out_w()};
}

MaxPool2d::MaxPool2d(int kernel, int stride, int padding)
    : Pool2d(square(kernel, stride, padding)) {}

std::size_t MaxPool2d::workspace_floats(const Shape& input, std::int64_t n) const {
  return geometry(input.batched(n)).out_size();  // one argmax per output
}

void MaxPool2d::forward(const Tensor& in, Tensor& out, std::span<float> workspace,
                        const StepContext& ctx) {
  cpu::maxpool2d_forward(geometry(in.shape), in.data, out.data, workspace.data());
}

void MaxPool2d::backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                         std::span<float> workspace, const StepContext& ctx) {
  if (!grad_in.defined()) return;
  cpu::maxpool2d_backward(geometry(in.shape), grad_out.data, workspace.data(), grad_in.data);
}

AvgPool2d::AvgPool2d(int kernel, int stride, int padding)
    : Pool2d(square(kernel, stride, padding)) {}

void AvgPool2d::forward(const Tensor& in, Tensor& out, std::span<float> workspace,
                        const StepContext& ctx) {
  cpu::avgpool2d_forward(geometry(in.shape), in.data, out.data);
}

void AvgPool2d::backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                         std::span<float> workspace, const StepContext& ctx) {
  if (!grad_in.defined()) return;
  cpu::avgpool2d_backward(geometry(in.shape), grad_out.data, grad_in.data);
}

}  // namespace murmur::nn
