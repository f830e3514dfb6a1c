#include "optimizers/adamw.h"

#include <cmath>

namespace murmur::optimizers {

AdamW::AdamW(const OptimizerConfig& config, std::size_t size)
    : LocalOptimizer(size),
      beta1_(config.beta1),
      beta2_(config.beta2),
      eps_(config.eps),
      weight_decay_(config.weight_decay),
      exp_avg_(size, 0.0f),
      exp_avg_sq_(size, 0.0f) {}

void AdamW::step(std::span<float> params, std::span<const float> grads, float lr) {
  check_sizes(params, grads);
  ++steps_;
  // Scalars in double, as torch computes them in Python floats; the loop runs in float.
  const double t = static_cast<double>(steps_);
  const double bias1 = 1.0 - std::pow(beta1_, t);
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(beta2_, t));
  const float decay = static_cast<float>(1.0 - lr * weight_decay_);
  const float b1 = static_cast<float>(beta1_), one_b1 = static_cast<float>(1.0 - beta1_);
  const float b2 = static_cast<float>(beta2_), one_b2 = static_cast<float>(1.0 - beta2_);
  const float step_size = static_cast<float>(lr / bias1);
  const float inv_bias2_sqrt = static_cast<float>(1.0 / bias2_sqrt);
  const float eps = static_cast<float>(eps_);

  const std::size_t n = params.size();
  float* __restrict p = params.data();
  const float* __restrict g = grads.data();
  float* __restrict m = exp_avg_.data();
  float* __restrict v = exp_avg_sq_.data();
  for (std::size_t i = 0; i < n; ++i) {
    p[i] *= decay;
    m[i] = b1 * m[i] + one_b1 * g[i];
    v[i] = b2 * v[i] + one_b2 * g[i] * g[i];
    // Vectorizes (vsqrtps) only under -fno-math-errno: GCC keeps a scalar call for errno
    // otherwise, and its optimize("no-math-errno") attribute does not help (GCC 12).
    const float denom = std::sqrt(v[i]) * inv_bias2_sqrt + eps;
    p[i] -= step_size * m[i] / denom;
  }
}

std::vector<std::pair<std::string, std::span<float>>> AdamW::state() {
  return {{"exp_avg", std::span<float>(exp_avg_)}, {"exp_avg_sq", std::span<float>(exp_avg_sq_)}};
}

}  // namespace murmur::optimizers
