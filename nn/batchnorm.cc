#include "nn/batchnorm.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "nn/cpu/batchnorm.h"

namespace murmur::nn {
namespace {

cpu::BatchNormGeometry geometry(const Tensor& t) {
  return cpu::BatchNormGeometry{static_cast<int>(t.dim(0)), static_cast<int>(t.dim(1)),
                                static_cast<int>(t.dim(2) * t.dim(3))};
}

}  // namespace

BatchNorm2d::BatchNorm2d(std::int64_t channels, float eps, float momentum)
    : channels_(channels), eps_(eps), momentum_(momentum) {
  if (channels <= 0 || !(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f)) {
    throw ConfigError(fmt::format(
        "BatchNorm2d({}, eps={}, momentum={}): needs channels > 0, eps > 0, momentum in [0, 1]",
        channels, eps, momentum));
  }
}

std::string BatchNorm2d::describe() const {
  return fmt::format("BatchNorm2d({}, eps={}, momentum={})", channels_, eps_, momentum_);
}

void BatchNorm2d::declare(ParamDeclarer& decl) {
  weight_index_ = decl.param("weight", {channels_});
  bias_index_ = decl.param("bias", {channels_});
  mean_index_ = decl.buffer("running_mean", {channels_});
  var_index_ = decl.buffer("running_var", {channels_});
  batches_index_ = decl.buffer("num_batches_tracked", {});
}

void BatchNorm2d::bind(ParamViews& views) {
  weight_ = views.param(weight_index_);
  bias_ = views.param(bias_index_);
  weight_grad_ = views.grad(weight_index_);
  bias_grad_ = views.grad(bias_index_);
  running_mean_ = views.buffer(mean_index_);
  running_var_ = views.buffer(var_index_);
  num_batches_tracked_ = views.buffer(batches_index_);
}

void BatchNorm2d::init(Rng& rng) {
  std::fill(weight_.begin(), weight_.end(), 1.0f);
  std::fill(bias_.begin(), bias_.end(), 0.0f);
  std::fill(running_mean_.begin(), running_mean_.end(), 0.0f);
  std::fill(running_var_.begin(), running_var_.end(), 1.0f);
  std::fill(num_batches_tracked_.begin(), num_batches_tracked_.end(), 0.0f);
}

Shape BatchNorm2d::output_shape(const Shape& input) const {
  if (input.rank() != 3 || input[0] != channels_) {
    throw ConfigError(fmt::format("{}: input of shape {}, expected [{}, h, w]", describe(),
                                  input.str(), channels_));
  }
  return input;
}

std::size_t BatchNorm2d::workspace_floats(const Shape& input, std::int64_t n) const {
  return 2 * static_cast<std::size_t>(channels_);
}

void BatchNorm2d::forward(const Tensor& in, Tensor& out, std::span<float> workspace,
                          const StepContext& ctx) {
  const cpu::BatchNormGeometry g = geometry(in);
  float* mean = workspace.data();
  float* invstd = mean + channels_;
  if (ctx.training) {
    cpu::batchnorm2d_forward_train(g, in.data, weight_.data(), bias_.data(), eps_, momentum_,
                                   out.data, mean, invstd, running_mean_.data(),
                                   running_var_.data());
    num_batches_tracked_[0] += 1.0f;
  } else {
    cpu::batchnorm2d_forward_eval(g, in.data, weight_.data(), bias_.data(), eps_,
                                  running_mean_.data(), running_var_.data(), out.data);
    // Keep what we normalized with, so a backward in evaluation mode needs no recomputation.
    std::copy(running_mean_.begin(), running_mean_.end(), mean);
    cpu::batchnorm_invstd(g.channels, running_var_.data(), eps_, invstd);
  }
}

void BatchNorm2d::backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                           std::span<float> workspace, const StepContext& ctx) {
  const float* mean = workspace.data();
  const float* invstd = mean + channels_;
  cpu::batchnorm2d_backward(geometry(in), ctx.training, in.data, grad_out.data, weight_.data(),
                            mean, invstd, grad_in.defined() ? grad_in.data : nullptr,
                            weight_grad_.data(), bias_grad_.data(), ctx.accumulate_grads);
}

}  // namespace murmur::nn
