#include "optimizers/adamw.h"

#include <cmath>

namespace murmur::optimizers {

AdamW::AdamW(const OptimizerConfig& config, device::Device& device, std::size_t size)
    : LocalOptimizer(device, size),
      beta1_(config.beta1),
      beta2_(config.beta2),
      eps_(config.eps),
      weight_decay_(config.weight_decay),
      exp_avg_(device.zeros(size)),
      exp_avg_sq_(device.zeros(size)) {}

void AdamW::step(std::span<float> params, std::span<const float> grads, float lr) {
  check_sizes(params, grads);
  ++steps_;
  // Scalars in double, as torch computes them in Python floats; the update runs in float.
  const double t = static_cast<double>(steps_);
  const double bias1 = 1.0 - std::pow(beta1_, t);
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(beta2_, t));
  device::AdamWStep a;
  a.decay = static_cast<float>(1.0 - lr * weight_decay_);
  a.beta1 = static_cast<float>(beta1_);
  a.one_minus_beta1 = static_cast<float>(1.0 - beta1_);
  a.beta2 = static_cast<float>(beta2_);
  a.one_minus_beta2 = static_cast<float>(1.0 - beta2_);
  a.step_size = static_cast<float>(lr / bias1);
  a.inv_bias2_sqrt = static_cast<float>(1.0 / bias2_sqrt);
  a.eps = static_cast<float>(eps_);
  device_.adamw_step(params, grads, exp_avg_.span(), exp_avg_sq_.span(), a);
}

std::vector<std::pair<std::string, std::span<float>>> AdamW::state() {
  return {{"exp_avg", exp_avg_.span()}, {"exp_avg_sq", exp_avg_sq_.span()}};
}

}  // namespace murmur::optimizers
