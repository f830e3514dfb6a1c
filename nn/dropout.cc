#include "nn/dropout.h"

#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "nn/cpu/elementwise.h"

namespace murmur::nn {

Dropout::Dropout(double p) : p_(p) {
  if (!(p >= 0.0 && p < 1.0)) throw ConfigError(fmt::format("Dropout(p={}): need 0 <= p < 1", p));
}

std::string Dropout::describe() const { return fmt::format("Dropout(p={})", p_); }

std::size_t Dropout::workspace_floats(const Shape& input, std::int64_t n) const {
  return static_cast<std::size_t>(input.numel() * n);  // the scaled keep mask
}

void Dropout::forward(const Tensor& in, Tensor& out, std::span<float> workspace,
                      const StepContext& ctx) {
  const std::int64_t n = in.numel();
  last_training_ = ctx.training && p_ > 0.0;
  if (!last_training_) {
    if (out.data != in.data) std::memcpy(out.data, in.data, n * sizeof(float));
    return;
  }
  if (ctx.rng == nullptr) throw Error("Dropout: training step without an Rng");
  const float scale = static_cast<float>(1.0 / (1.0 - p_));
  float* mask = workspace.data();
  Rng& rng = *ctx.rng;
  // One 64-bit draw gives 53 uniform bits; the comparison is exact in double, so a seed gives
  // the same mask on every machine.
  for (std::int64_t i = 0; i < n; ++i) mask[i] = rng.uniform() >= p_ ? scale : 0.0f;
  cpu::multiply(out.data, in.data, mask, n);
}

void Dropout::backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                       std::span<float> workspace, const StepContext& ctx) {
  if (!grad_in.defined()) return;
  const std::int64_t n = grad_out.numel();
  if (!last_training_) {
    if (grad_in.data != grad_out.data) std::memcpy(grad_in.data, grad_out.data, n * sizeof(float));
    return;
  }
  cpu::multiply(grad_in.data, grad_out.data, workspace.data(), n);
}

}  // namespace murmur::nn
