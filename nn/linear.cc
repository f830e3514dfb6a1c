#include "nn/linear.h"

#include <fmt/format.h>

#include "core/error.h"
#include "nn/activations.h"
#include "nn/cpu/blas.h"
#include "nn/cpu/elementwise.h"
#include "nn/init.h"

namespace murmur::nn {

Linear::Linear(std::int64_t in, std::int64_t out, bool bias)
    : in_(in), out_(out), has_bias_(bias) {
  if (in <= 0 || out <= 0)
    throw ConfigError(fmt::format("Linear({} -> {}): sizes must be positive", in, out));
}

std::string Linear::describe() const {
  return fmt::format("Linear({} -> {}{}{})", in_, out_, has_bias_ ? "" : ", no bias",
                     fused_relu_ ? ", fused ReLU" : "");
}

void Linear::declare(ParamDeclarer& decl) {
  weight_index_ = decl.param("weight", {out_, in_});
  if (has_bias_) bias_index_ = decl.param("bias", {out_});
}

void Linear::bind(ParamViews& views) {
  weight_ = views.param(weight_index_);
  weight_grad_ = views.grad(weight_index_);
  if (has_bias_) {
    bias_ = views.param(bias_index_);
    bias_grad_ = views.grad(bias_index_);
  }
}

void Linear::init(Rng& rng) {
  uniform_(weight_, default_weight_bound(in_), rng);
  if (has_bias_) uniform_(bias_, default_bias_bound(in_), rng);
}

Shape Linear::output_shape(const Shape& input) const {
  if (input.rank() != 1 || input[0] != in_)
    throw ConfigError(fmt::format("Linear({} -> {}): input of shape {} (flatten first)", in_, out_,
                                  input.str()));
  return Shape{out_};
}

bool Linear::absorb(const Layer& next) {
  if (fused_relu_ || dynamic_cast<const ReLU*>(&next) == nullptr) return false;
  fused_relu_ = true;
  return true;
}

void Linear::forward(const Tensor& in, Tensor& out, std::span<float> workspace,
                     const StepContext& ctx) {
  const std::int64_t n = in.rows();
  // out[n, out] = in[n, in] * W^T, then bias (and ReLU) in one pass while `out` is in cache.
  cpu::gemm(false, true, n, out_, in_, 1.0f, in.data, in_, weight_.data(), in_, 0.0f, out.data,
            out_);
  const float* b = has_bias_ ? bias_.data() : nullptr;
  if (fused_relu_) {
    cpu::add_bias_relu(out.data, out.data, b, n, out_);
  } else if (b != nullptr) {
    cpu::add_bias(out.data, out.data, b, n, out_);
  }
}

void Linear::backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                      std::span<float> workspace, const StepContext& ctx) {
  const std::int64_t n = in.rows();
  float* g = grad_out.data;
  // The absorbed ReLU's backward: its output is our output, so the mask is out > 0.
  if (fused_relu_) cpu::relu_backward(g, g, out.data, n * out_);
  const float beta = ctx.accumulate_grads ? 1.0f : 0.0f;
  // dW[out, in] = g^T[out, n] * x[n, in]
  cpu::gemm(true, false, out_, in_, n, 1.0f, g, out_, in.data, in_, beta, weight_grad_.data(),
            in_);
  if (has_bias_) cpu::column_sums(bias_grad_.data(), g, n, out_, ctx.accumulate_grads);
  // dx[n, in] = g[n, out] * W[out, in]
  if (grad_in.defined())
    cpu::gemm(false, false, n, in_, out_, 1.0f, g, out_, weight_.data(), in_, 0.0f, grad_in.data,
              in_);
}

}  // namespace murmur::nn
