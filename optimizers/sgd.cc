#include "optimizers/sgd.h"

#include "core/error.h"

namespace murmur::optimizers {

Sgd::Sgd(const OptimizerConfig& config, std::size_t size)
    : LocalOptimizer(size),
      momentum_(static_cast<float>(config.momentum)),
      weight_decay_(static_cast<float>(config.weight_decay)),
      nesterov_(config.nesterov) {
  if (nesterov_ && momentum_ <= 0.0f)
    throw ConfigError("train.optimizer.nesterov: needs momentum > 0");
  if (momentum_ > 0.0f) buffer_.assign(size, 0.0f);
}

void Sgd::step(std::span<float> params, std::span<const float> grads, float lr) {
  check_sizes(params, grads);
  const std::size_t n = params.size();
  float* __restrict p = params.data();
  const float* __restrict g = grads.data();
  const float wd = weight_decay_;
  const float mu = momentum_;
  // One branch-free loop per case, so each vectorizes; the operation order is torch's, so the
  // float results match it.
  if (mu == 0.0f) {
    for (std::size_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + wd * p[i]);
  } else {
    float* __restrict b = buffer_.data();
    if (steps_ == 0) {
      for (std::size_t i = 0; i < n; ++i) b[i] = g[i] + wd * p[i];
    } else {
      for (std::size_t i = 0; i < n; ++i) b[i] = mu * b[i] + (g[i] + wd * p[i]);
    }
    if (nesterov_) {
      for (std::size_t i = 0; i < n; ++i) p[i] -= lr * ((g[i] + wd * p[i]) + mu * b[i]);
    } else {
      for (std::size_t i = 0; i < n; ++i) p[i] -= lr * b[i];
    }
  }
  ++steps_;
}

std::vector<std::pair<std::string, std::span<float>>> Sgd::state() {
  if (buffer_.empty()) return {};
  return {{"momentum", std::span<float>(buffer_)}};
}

}  // namespace murmur::optimizers
